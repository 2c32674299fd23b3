// Adopting a workload that already runs in a member cluster (WorkloadService.
// PromoteWorkload, as `karmadactl promote`): the form, and what the server made of it.

import { api } from './client';
import { h, mount } from './dom';

export function promoteForm(inst: string, clusters: string[], done: () => void) {
  const input = (id: string, label: string, placeholder: string) => h('input', { id, placeholder, 'aria-label': label }) as HTMLInputElement;
  const cluster = h('select', { id: 'promote-cluster', 'aria-label': 'member cluster' }, clusters.map((c) => h('option', { value: c }, c))) as HTMLSelectElement;
  const namespace = input('promote-namespace', 'namespace', 'namespace');
  const kind = h('select', { id: 'promote-kind', 'aria-label': 'kind' }, ['Deployment', 'StatefulSet', 'DaemonSet', 'Job'].map((k) => h('option', { value: k }, k))) as HTMLSelectElement;
  const name = input('promote-name', 'workload name', 'name');
  const deps = input('promote-with', 'adopted with it', 'ConfigMap/settings, Service/web');
  const outcome = h('div', { role: 'alert', id: 'promote-outcome' });
  const promote = async () => {
    mount(outcome, h('div', { class: 'muted' }, 'promoting…'));
    try {
      const r = await api.promote(inst, cluster.value, {
        namespace: namespace.value.trim(),
        kind: kind.value,
        name: name.value.trim(),
        dependencies: deps.value
          .split(',')
          .map((d) => d.trim())
          .filter((d) => d),
      });
      mount(outcome, h('div', { class: 'muted' }, `promoted ${(r.promoted ?? []).join(', ')}; placed on ${cluster.value} by PropagationPolicy ${r.policyName ?? ''}`));
      setTimeout(done, 1500);
    } catch (e) {
      mount(outcome, h('div', { class: 'violation' }, (e as Error).message));
    }
  };
  return h(
    'div',
    { class: 'form', id: 'promote-form' },
    h('p', { class: 'muted' }, 'Karmada takes the running object over in place: its pods keep running.'),
    h('div', { class: 'actions' }, cluster, namespace, kind, name),
    deps,
    h('div', { class: 'actions' }, h('button', { class: 'primary small', onclick: promote }, 'Promote'), h('button', { class: 'small', onclick: done }, 'Close')),
    outcome,
  );
}
