// Kubernetes quantities ("3500m", "64Gi", "110") as numbers, for the capacity bars only.

const SUFFIX: Record<string, number> = {
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

export function quantity(q: string | undefined): number {
  const m = /^([+-]?[0-9.]+)(?:[eE]([+-]?[0-9]+))?([a-zA-Z]*)$/.exec((q ?? '').trim());
  if (!m) return 0;
  const scale = SUFFIX[m[3]];
  if (scale === undefined) return 0;
  return parseFloat(m[1]) * 10 ** Number(m[2] ?? 0) * scale;
}
