// The fleet at a glance: each instance's phase and why, clusters, nodes, capacity bars,
// policy and workload counts.

import { api, atLeast, type Instance, type Condition, type Roles } from './client';
import { age, h, confirmDialog } from './dom';
import { quantity, usage } from './quantity';

/** The condition that explains the phase: the first one not True other than the Ready
 *  summary, else Ready. */
export function explanation(conditions: Condition[] | undefined): string {
  const list = conditions ?? [];
  const c = list.find((c) => c.status !== 'True' && c.type !== 'Ready') ?? list.find((c) => c.type === 'Ready');
  if (!c) return '';
  return `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}${c.message ? `: ${c.message}` : ''}`;
}

export function bar(label: string, used: string | undefined, total: string | undefined) {
  const u = quantity(used);
  const t = quantity(total);
  const pct = t > 0 ? Math.min(100, (u / t) * 100) : 0;
  return h(
    'div',
    { class: 'bar', title: `${label}: ${used ?? '0'} of ${total ?? '0'} allocated` },
    h('span', { class: 'bar-label' }, `${label} ${usage(label, u, t)}`),
    h('span', { class: 'bar-track' }, h('span', { class: 'bar-fill', style: `width:${pct.toFixed(1)}%` })),
  );
}

export function phaseBadge(phase: string | undefined) {
  const p = phase || 'Pending';
  return h('span', { class: `phase phase-${p.toLowerCase()}`, 'data-phase': p }, p);
}

function deletionText(i: Instance): string {
  const name = i.metadata?.name ?? '';
  const managed = i.spec?.mode === 'INSTANCE_MODE_MANAGED';
  const parts = [`the Instance "${name}" and its InstanceRegistration`];
  if (managed) {
    parts.push(`the managed Karmada object${i.spec?.managedNamespace ? ` in namespace ${i.spec.managedNamespace}` : ''} and the control plane karmada-operator runs for it`);
  }
  const kept = managed
    ? 'Member clusters are not touched.'
    : `The kubeconfig Secret ${i.spec?.kubeconfigSecretRef?.namespace}/${i.spec?.kubeconfigSecretRef?.name} and the Karmada instance itself are kept; Kairship only stops managing it.`;
  return `This removes ${parts.join(', and ')}. ${kept}`;
}

export async function askDelete(i: Instance, after: () => void, report: (e: unknown) => void) {
  const name = i.metadata?.name ?? '';
  const ok = await confirmDialog(`Delete instance ${name}?`, deletionText(i), `Delete ${name}`);
  if (!ok) return;
  try {
    await api.deleteInstance(name);
    after();
  } catch (e) {
    report(e);
  }
}

/** What hibernation stops, said before an admin puts an instance to sleep. */
const SLEEP_RISK =
  'Its control plane is scaled to zero in the host and Kairship stops watching it; its data is kept and its member clusters keep running their workloads. ' +
  "While it sleeps Karmada's controllers do nothing: a failing member is not failed over, workloads are not rescheduled and policy changes are not applied until it wakes. " +
  'The next request through Kairship (kubectl, the API, this console) wakes it and is held until it answers.';

async function askHibernate(i: Instance, after: () => void, report: (e: unknown) => void) {
  const name = i.metadata?.name ?? '';
  const ok = await confirmDialog(`Hibernate instance ${name}?`, SLEEP_RISK, `Hibernate ${name}`);
  if (!ok) return;
  try {
    await api.hibernate(name, true);
    after();
  } catch (e) {
    report(e);
  }
}

/** A managed instance's hibernation: where it is, and the button that moves it. */
function hibernation(i: Instance, roles: Roles, onChange: () => void, report: (e: unknown) => void) {
  if (i.spec?.mode !== 'INSTANCE_MODE_MANAGED') return null;
  const name = i.metadata?.name ?? '';
  const hs = i.status?.hibernation;
  const state = hs?.state || 'Awake';
  const asleep = state !== 'Awake';
  const role = roles.on(name);
  const button = asleep
    ? atLeast(role, 'view') &&
      h('button', {
        class: 'small', 'data-action': 'wake',
        onclick: async () => {
          try { await api.hibernate(name, false); onChange(); } catch (e) { report(e); }
        },
      }, 'Wake')
    : atLeast(role, 'admin') &&
      h('button', { class: 'small', 'data-action': 'hibernate', onclick: () => askHibernate(i, onChange, report) }, 'Hibernate');
  const hours = ((Number(hs?.hibernatedSeconds ?? 0)) / 3600).toFixed(1);
  const text = asleep
    ? `${state}${hs?.reason ? `: ${hs.reason}` : ''}`
    : hs ? `awake · woken ${hs.wakes ?? 0}×, ${hours} h asleep in all` : '';
  return h('div', { class: 'muted', 'data-col': 'hibernation', 'data-state': state }, text, ' ', button);
}

export function overviewRows(list: Instance[], roles: Roles, onChange: () => void, report: (e: unknown) => void) {
  return list.map((i) => {
    const name = i.metadata?.name ?? '';
    const st = i.status?.stats ?? {};
    const policies =
      (st.propagationPolicies ?? 0) +
      (st.overridePolicies ?? 0) +
      (st.clusterPropagationPolicies ?? 0) +
      (st.clusterOverridePolicies ?? 0);
    return h(
      'tr',
      { 'data-instance': name },
      h(
        'td',
        {},
        h('a', { href: `#/instances/${encodeURIComponent(name)}` }, name),
        h('div', { class: 'muted' }, i.spec?.mode === 'INSTANCE_MODE_MANAGED' ? 'managed' : 'external', i.status?.karmadaVersion ? ` · ${i.status.karmadaVersion}` : ''),
        controlPlane(i),
      ),
      h('td', {}, phaseBadge(i.status?.phase), h('div', { class: 'why' }, explanation(i.status?.conditions)), hibernation(i, roles, onChange, report)),
      h('td', { 'data-col': 'clusters' }, `${st.clustersReady ?? 0}/${st.clustersTotal ?? 0}`),
      h('td', {}, `${st.nodesReady ?? 0}/${st.nodesTotal ?? 0}`),
      h(
        'td',
        { class: 'bars' },
        bar('CPU', st.cpuAllocated, st.cpuAllocatable),
        bar('Memory', st.memoryAllocated, st.memoryAllocatable),
        bar('Pods', st.podsAllocated, st.podsAllocatable),
      ),
      h('td', { title: `PP ${st.propagationPolicies ?? 0}, OP ${st.overridePolicies ?? 0}, CPP ${st.clusterPropagationPolicies ?? 0}, COP ${st.clusterOverridePolicies ?? 0}` }, policies),
      h('td', {}, st.workloads ?? 0),
      h('td', { 'data-col': 'last-request', title: i.status?.lastRequestTime || 'no request through Kairship since it first ran this instance' }, lastRequest(i.status?.lastRequestTime)),
      h('td', {}, atLeast(roles.on(i.metadata?.name ?? ''), 'admin') && h('button', { class: 'danger small', onclick: () => askDelete(i, onChange, report) }, 'Delete')),
    );
  });
}

/** How long ago Kairship's proxy last answered for the instance: idle ones stand out. */
function lastRequest(at?: string): string {
  if (!at) return 'never';
  const secs = Math.max(0, Math.floor((Date.now() - Date.parse(at)) / 1000));
  return Number.isNaN(secs) ? at : `${age(secs)} ago`;
}

/** What a managed instance's control plane requests in the host, under its name. */
function controlPlane(i: Instance) {
  const c = i.status?.controlPlane;
  if (!c) return null;
  return h('div', { class: 'muted', 'data-col': 'control-plane', title: 'what its control plane pods request in the host' }, `control plane: ${c.pods ?? 0} pods, ${c.cpuRequests ?? '0'} CPU, ${c.memoryRequests ?? '0'} memory`);
}

export function overviewTable(list: Instance[], roles: Roles, onChange: () => void, report: (e: unknown) => void) {
  return h(
    'table',
    { class: 'grid', id: 'instances' },
    h('thead', {}, h('tr', {}, ['Instance', 'Phase', 'Clusters', 'Nodes', 'Allocated / allocatable', 'Policies', 'Workloads', 'Last request', ''].map((t) => h('th', {}, t)))),
    h('tbody', {}, overviewRows(list, roles, onChange, report)),
  );
}
