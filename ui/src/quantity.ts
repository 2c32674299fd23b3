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

/** A quantity for people: CPU in cores, memory in binary units, counts as integers, so
 *  "75244m" of "240" reads "75.2 / 240 cores". */
export function human(label: string, q: number): string {
  const fixed = (n: number) => (n >= 100 || Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1));
  if (label === 'CPU') return fixed(q);
  if (label === 'Memory') {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (q >= 1024 && i < units.length - 1) {
      q /= 1024;
      i += 1;
    }
    return `${fixed(q)} ${units[i]}`;
  }
  return Math.round(q).toString();
}

/** "used / total unit" with both sides in the same unit. */
export function usage(label: string, used: number, total: number): string {
  if (label === 'Memory') return `${human(label, used)} / ${human(label, total)}`;
  const unit = label === 'CPU' ? ' cores' : '';
  return `${human(label, used)} / ${human(label, total)}${unit}`;
}
