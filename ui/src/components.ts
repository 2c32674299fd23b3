// A managed instance's control plane: the components karmada-operator runs for it in the
// host, with their health, restarts and last failure; an admin reads a component's log,
// restarts it (as `kubectl rollout restart`) and sets its replicas (the instance's
// component_replicas, which karmada-operator carries out).

import { api, componentLog, type Component } from './client';
import { confirmDialog, h, mount, numberDialog } from './dom';
import { openLog } from './logs';

function rows(inst: string, list: Component[], canAdmin: boolean, done: () => void, report: (e: unknown) => void) {
  return list.map((c) => {
    const name = c.name ?? '';
    const restart = async () => {
      if (!(await confirmDialog(`Restart ${name}?`, `Its pods are replaced as its rollout strategy allows.`, 'Restart'))) return;
      try {
        await api.restartComponent(inst, name);
      } catch (e) {
        report(e);
      }
      done();
    };
    const setting = c.setting ?? '';
    const scale = async () => {
      const etcd = setting === 'etcd';
      const why = etcd ? 'etcd members: an odd count keeps a quorum (1, 3, 5 or 7).' : 'From 1 to 10; karmada-operator rolls the change out.';
      const n = await numberDialog(`Replicas of ${name}`, why, c.replicas ?? 1, 1, etcd ? 7 : 10, etcd ? 2 : 1);
      if (n === null) return;
      try {
        await api.scaleComponent(inst, setting, n);
      } catch (e) {
        report(e);
      }
      done();
    };
    return h(
      'tr',
      { 'data-component': name, 'data-health': c.health ?? '' },
      h('td', {}, name, h('div', { class: 'muted' }, c.kind ?? '')),
      h('td', {}, `${c.readyReplicas ?? 0}/${c.replicas ?? 0}`),
      h('td', {}, c.health ?? '', c.reason && h('div', { class: 'muted' }, c.reason)),
      h('td', {}, String(c.restarts ?? 0), c.lastTermination && h('div', { class: 'muted' }, c.lastTermination)),
      h(
        'td',
        {},
        canAdmin && h('button', { class: 'small', onclick: () => openLog(name, `of ${inst}`, componentLog(inst, name)) }, 'Log'),
        canAdmin && h('button', { class: 'small', onclick: () => void restart() }, 'Restart'),
        canAdmin && setting && h('button', { class: 'small', onclick: () => void scale() }, 'Scale'),
      ),
    );
  });
}

/** Fills `slot` with the components table (or why it cannot be read). */
export async function showComponents(slot: Element, inst: string, canAdmin: boolean, done: () => void, report: (e: unknown) => void) {
  try {
    const list = await api.components(inst);
    const table = h(
      'table',
      { id: 'components' },
      h('thead', {}, h('tr', {}, ['Component', 'Ready', 'Health', 'Restarts', ''].map((t) => h('th', {}, t)))),
      h('tbody', {}, rows(inst, list, canAdmin, done, report)),
    );
    mount(slot, h('h3', {}, 'Control plane'), list.length === 0 ? h('p', { class: 'muted' }, 'karmada-operator runs no components for it yet.') : table);
  } catch (e) {
    mount(slot, h('h3', {}, 'Control plane'), h('p', { class: 'muted' }, `Components are not readable: ${(e as Error).message}`));
  }
}
