// The instance's resources beyond workloads and policies, kind by kind, as the caller
// may list them through the proxy: Services, Ingresses, ConfigMaps, Secrets (names and
// keys, never a value), Jobs, CronJobs, CRDs and their objects, ResourceBindings and
// Works. Each row opens as YAML (not a Secret, nor a Work: it carries every manifest,
// Secrets' data included) and links to its propagation trace.

import { stringify } from 'yaml';
import { api, proxyGet, proxyTable, type KubeTable } from './client';
import { h, mount } from './dom';

/** Objects listed per kind. */
const LISTED = 500;

/** A kind the page lists: its tab, where it is listed, what `trace` calls it. */
type Kind = { tab: string; path: string; kind: string; group: string; version: string; yaml: boolean; trace: boolean; namespaced: boolean };

const KINDS: Kind[] = [
  { tab: 'Services', path: '/api/v1/services', kind: 'Service', group: '', version: 'v1', yaml: true, trace: true, namespaced: true },
  { tab: 'Ingresses', path: '/apis/networking.k8s.io/v1/ingresses', kind: 'Ingress', group: 'networking.k8s.io', version: 'v1', yaml: true, trace: true, namespaced: true },
  { tab: 'ConfigMaps', path: '/api/v1/configmaps', kind: 'ConfigMap', group: '', version: 'v1', yaml: true, trace: true, namespaced: true },
  { tab: 'Secrets', path: '/api/v1/secrets', kind: 'Secret', group: '', version: 'v1', yaml: false, trace: true, namespaced: true },
  { tab: 'Jobs', path: '/apis/batch/v1/jobs', kind: 'Job', group: 'batch', version: 'v1', yaml: true, trace: true, namespaced: true },
  { tab: 'CronJobs', path: '/apis/batch/v1/cronjobs', kind: 'CronJob', group: 'batch', version: 'v1', yaml: true, trace: true, namespaced: true },
  { tab: 'CRDs', path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', kind: 'CustomResourceDefinition', group: 'apiextensions.k8s.io', version: 'v1', yaml: true, trace: false, namespaced: false },
  { tab: 'ResourceBindings', path: '/apis/work.karmada.io/v1alpha2/resourcebindings', kind: 'ResourceBinding', group: 'work.karmada.io', version: 'v1alpha2', yaml: true, trace: false, namespaced: true },
  { tab: 'Works', path: '/apis/work.karmada.io/v1alpha1/works', kind: 'Work', group: 'work.karmada.io', version: 'v1alpha1', yaml: false, trace: false, namespaced: true },
];

/** The kind a CRD defines, listed like the others (its storage version). */
async function customKind(inst: string, crd: string): Promise<Kind> {
  const o = (await proxyGet(inst, `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(crd)}`)) as {
    spec?: { group?: string; scope?: string; names?: { kind?: string; plural?: string }; versions?: { name: string; storage?: boolean }[] };
  };
  const s = o.spec ?? {};
  const version = (s.versions ?? []).find((v) => v.storage)?.name ?? s.versions?.[0]?.name ?? 'v1';
  return { tab: s.names?.kind ?? crd, path: `/apis/${s.group}/${version}/${s.names?.plural}`, kind: s.names?.kind ?? '', group: s.group ?? '', version, yaml: true, trace: true, namespaced: s.scope === 'Namespaced' };
}

function itemPath(k: Kind, ns: string, name: string) {
  const [prefix, plural] = [k.path.slice(0, k.path.lastIndexOf('/')), k.path.slice(k.path.lastIndexOf('/') + 1)];
  return `${prefix}${k.namespaced ? `/namespaces/${encodeURIComponent(ns)}` : ''}/${plural}/${encodeURIComponent(name)}`;
}

function tableView(inst: string, k: Kind, t: KubeTable, open: (ns: string, name: string) => void, objects: (crd: string) => void) {
  const cols = (t.columnDefinitions ?? []).map((c, i) => ({ ...c, i })).filter((c) => !c.priority);
  const rows = t.rows ?? [];
  return h(
    'table',
    { id: 'resource-table', 'data-kind': k.kind },
    h('thead', {}, h('tr', {}, k.namespaced && h('th', {}, 'Namespace'), cols.map((c) => h('th', {}, c.name)), h('th', {}, ''))),
    h(
      'tbody',
      {},
      rows.map((r) => {
        const m = r.object?.metadata ?? {};
        const ns = m.namespace ?? '';
        const name = m.name ?? '';
        const trace = `#/instances/${encodeURIComponent(inst)}/trace/${encodeURIComponent(k.group ? `${k.kind}.${k.version}.${k.group}` : k.kind)}/${encodeURIComponent(ns || '_')}/${encodeURIComponent(name)}`;
        return h(
          'tr',
          { 'data-name': name, 'data-namespace': ns },
          k.namespaced && h('td', {}, ns),
          cols.map((c) => h('td', {}, String(r.cells[c.i] ?? ''))),
          h(
            'td',
            {},
            k.yaml && h('button', { class: 'small link', onclick: () => open(ns, name) }, 'YAML'),
            k.kind === 'Secret' && h('button', { class: 'small link', onclick: () => open(ns, name) }, 'Keys'),
            k.kind === 'CustomResourceDefinition' && h('button', { class: 'small link', onclick: () => objects(name) }, 'Objects'),
            k.trace && h('a', { class: 'trace-link', href: trace }, 'trace'),
          ),
        );
      }),
    ),
  );
}

/** `#/instances/<inst>/resources`: a tab per kind. */
export function resourcesPage(root: Element, inst: string, report: (e: unknown) => void) {
  let current: Kind = KINDS[0];
  const tabs = h('div', { class: 'actions', id: 'resource-tabs' });
  const slot = h('div', { id: 'resources' });
  const detail = h('div', { id: 'resource-detail' });
  const show = async (k: Kind) => {
    current = k;
    mount(tabs, [...KINDS, ...(KINDS.includes(k) ? [] : [k])].map((x) => h('button', { class: `small${x === k ? ' primary' : ''}`, 'data-tab': x.tab, onclick: () => void show(x) }, x.tab)));
    mount(detail);
    try {
      // The first page: an instance can hold many thousands of one kind.
      const t = await proxyTable(inst, `${k.path}?limit=${LISTED}`);
      mount(slot, tableView(inst, k, t, (ns, name) => void open(k, ns, name), (crd) => void custom(crd)));
    } catch (e) {
      mount(slot, h('p', { class: 'error', id: 'resources-error' }, (e as Error).message));
    }
  };
  const open = async (k: Kind, ns: string, name: string) => {
    try {
      if (k.kind === 'Secret') {
        // Its keys from the trace: the value never reaches the page.
        const t = await api.trace(inst, { kind: 'Secret', namespace: ns, name });
        mount(detail, h('h3', {}, `Secret ${ns}/${name}`), h('pre', { class: 'code', id: 'resource-yaml' }, `keys:\n${(t.keys ?? []).map((key) => `- ${key}`).join('\n')}`));
        return;
      }
      const o = await proxyGet(inst, itemPath(k, ns, name));
      const meta = (o.metadata ?? {}) as Record<string, unknown>;
      delete meta.managedFields;
      mount(detail, h('h3', {}, `${k.kind} ${ns ? `${ns}/` : ''}${name}`), h('pre', { class: 'code', id: 'resource-yaml' }, stringify(o)));
    } catch (e) {
      report(e);
    }
  };
  const custom = async (crd: string) => {
    try {
      await show(await customKind(inst, crd));
    } catch (e) {
      report(e);
    }
  };
  mount(
    root,
    h('h2', {}, h('a', { href: `#/instances/${encodeURIComponent(inst)}` }, inst), ' · resources'),
    h('p', { class: 'muted' }, 'What you may list in this instance, kind by kind, read through the proxy as you. Secrets show names and keys, never values; Works carry every manifest and open only as their trace.'),
    tabs,
    slot,
    detail,
  );
  void show(current);
  return async () => undefined;
}
