// A resource template's propagation trace as a picture: the template, the policy that
// claimed it, its binding, and a Work and member state per cluster, left to right; below
// it, the policies that did not claim it (with why), the events, and what was not shown.

import { api, Trace } from './client';
import { h, mount, Child } from './dom';

type Step = { kind: string; title: string; lines: Child[]; state?: string; data?: Record<string, string> };

function box(s: Step) {
  const attrs: Record<string, string> = { class: `trace-step ${s.state ?? ''}`, 'data-step': s.kind };
  for (const [k, v] of Object.entries(s.data ?? {})) attrs[`data-${k}`] = v;
  return h('div', attrs, h('div', { class: 'trace-kind' }, s.kind), h('div', { class: 'trace-title' }, s.title), ...s.lines.map((l) => h('div', { class: 'muted' }, l)));
}

const arrow = () => h('div', { class: 'trace-arrow', 'aria-hidden': 'true' }, '→');

/** The chain, left to right; a column per cluster at the end. */
export function tracePicture(t: Trace) {
  const ns = t.namespace ? `${t.namespace}/` : '';
  const template = box({ kind: t.kind ?? '', title: `${ns}${t.name}`, lines: [t.apiVersion ?? '', t.keys?.length ? `keys: ${t.keys.join(', ')}` : null], data: { name: t.name ?? '' } });
  const claimer = (t.policies ?? []).find((p) => !p.reason);
  const policy = claimer?.policy
    ? box({ kind: claimer.policy.kind ?? '', title: `${claimer.policy.namespace ? `${claimer.policy.namespace}/` : ''}${claimer.policy.name}`, lines: [claimer.policy.claimed ? 'claimed it' : 'will claim it', (t.overrides ?? []).length ? `overridden by ${(t.overrides ?? []).map((o) => o.name).join(', ')}` : null], state: claimer.policy.claimed ? 'ok' : 'pending', data: { name: claimer.policy.name ?? '' } })
    : box({ kind: 'PropagationPolicy', title: 'none', lines: ['no policy selects it'], state: 'missing' });
  const b = t.binding;
  const scheduled = (b?.conditions ?? []).find((c) => c.type === 'Scheduled');
  const binding = b
    ? box({ kind: t.namespace ? 'ResourceBinding' : 'ClusterResourceBinding', title: b.bindingName ?? '', lines: (b.conditions ?? []).map((c) => `${c.type}: ${c.status}${c.reason ? ` (${c.reason})` : ''}`), state: scheduled?.status === 'True' ? 'ok' : 'pending', data: { name: b.bindingName ?? '' } })
    : box({ kind: 'ResourceBinding', title: 'none yet', lines: ['made once a policy claims it'], state: 'missing' });
  const status = new Map((b?.aggregatedStatus ?? []).map((a) => [a.clusterName ?? '', a]));
  const works = new Map((t.works ?? []).map((w) => [w.cluster ?? '', w]));
  const clusters = (b?.clusters ?? []).map((c) => {
    const w = works.get(c.name ?? '');
    const a = status.get(c.name ?? '');
    const applied = w ? (w.conditions ?? []).find((x) => x.type === 'Applied') : undefined;
    return h(
      'div',
      { class: 'trace-row', 'data-cluster': c.name ?? '' },
      box({ kind: 'Work', title: w ? `${w.namespace}/${w.name}` : `karmada-es-${c.name}`, lines: [w ? `Applied: ${applied?.status ?? 'not yet'}` : 'not shown to you'], state: applied?.status === 'True' ? 'ok' : w ? 'pending' : 'hidden' }),
      arrow(),
      box({ kind: 'Member', title: c.name ?? '', lines: [`${c.replicas ?? 0} replica${c.replicas === 1 ? '' : 's'} scheduled`, a ? `${a.applied ? 'applied' : 'not applied'} · ${a.health ?? 'Unknown'}${a.replicas !== undefined ? ` · ready ${a.readyReplicas ?? 0}/${a.replicas ?? 0}` : ''}` : 'no status yet'], state: a?.health === 'Healthy' ? 'ok' : 'pending', data: { health: a?.health ?? '' } }),
    );
  });
  return h('div', { class: 'trace', id: 'trace-picture', role: 'img', 'aria-label': `propagation of ${t.kind} ${ns}${t.name}` }, template, arrow(), policy, arrow(), binding, arrow(), h('div', { class: 'trace-clusters' }, clusters.length ? clusters : h('div', { class: 'muted' }, 'on no cluster yet')));
}

function details(t: Trace) {
  const others = (t.policies ?? []).filter((p) => p.reason);
  return [
    h('h3', {}, 'Policies that did not claim it'),
    others.length
      ? h('ul', { id: 'trace-unclaimed' }, others.map((p) => h('li', { 'data-policy': p.policy?.name ?? '' }, h('strong', {}, `${p.policy?.kind} ${p.policy?.namespace ? `${p.policy.namespace}/` : ''}${p.policy?.name}`), ` (priority ${p.priority ?? 0}): ${p.reason}`)))
      : h('p', { class: 'muted' }, 'none'),
    h('h3', {}, 'Events'),
    h(
      'table',
      { id: 'trace-events' },
      h('thead', {}, h('tr', {}, ['When', 'Where', 'Object', 'Reason', 'Message'].map((c) => h('th', {}, c)))),
      h('tbody', {}, (t.events ?? []).map((e) => h('tr', { 'data-reason': e.reason ?? '' }, h('td', {}, e.time ?? ''), h('td', {}, e.cluster || 'instance'), h('td', {}, `${e.objectKind} ${e.objectName}`), h('td', {}, e.reason ?? ''), h('td', {}, e.message ?? '')))),
    ),
    (t.unavailable ?? []).length > 0 && h('ul', { id: 'trace-unavailable', class: 'muted' }, (t.unavailable ?? []).map((u) => h('li', {}, `Not shown: ${u}`))),
  ];
}

/** `#/instances/<inst>/trace/<kind>/<namespace or _>/<name>`, with a form to trace any other template. */
export function tracePage(root: Element, inst: string, kind: string, ns: string, name: string, report: (e: unknown) => void) {
  const field = (id: string, label: string, value: string) => h('input', { id, value, 'aria-label': label, placeholder: label });
  const k = field('trace-kind', 'kind', kind || 'Deployment');
  const n = field('trace-namespace', 'namespace', ns || 'default');
  const nm = field('trace-name', 'name', name);
  const go = (e: Event) => {
    e.preventDefault();
    location.hash = `#/instances/${encodeURIComponent(inst)}/trace/${encodeURIComponent(k.value.trim())}/${encodeURIComponent(n.value.trim() || '_')}/${encodeURIComponent(nm.value.trim())}`;
  };
  const slot = h('div', { id: 'trace' });
  mount(
    root,
    h('h2', {}, h('a', { href: `#/instances/${encodeURIComponent(inst)}` }, inst), ' · propagation trace'),
    h('p', { class: 'muted' }, 'How a resource template got where it is: the policy that claimed it, its binding, the Work on each cluster and its state there. Any kind: Deployment, Service, Ingress, ConfigMap, Secret (keys only), Job, CronJob, a custom resource.'),
    h('form', { id: 'trace-form', class: 'actions', onsubmit: go }, k, n, nm, h('button', { class: 'primary small', type: 'submit' }, 'Trace')),
    slot,
  );
  if (!name) return async () => undefined;
  return async () => {
    try {
      // `Kind.version.group` or `Kind.group`, as kubectl writes a kind.
      const [k0, ...rest] = kind.split('.');
      const versioned = rest.length > 1 && /^v\d/.test(rest[0]);
      const t = await api.trace(inst, { kind: k0, version: versioned ? rest[0] : '', group: (versioned ? rest.slice(1) : rest).join('.'), namespace: ns === '_' ? '' : ns, name });
      mount(slot, tracePicture(t), ...details(t));
    } catch (e) {
      // Said here, where the form is, rather than in the page's banner.
      mount(slot, h('p', { class: 'error', id: 'trace-error' }, (e as Error).message));
      void report;
    }
  };
}
