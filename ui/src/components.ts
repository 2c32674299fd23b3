// A managed instance's control plane: the components karmada-operator runs for it in the
// host, with their health, restarts and last failure; an admin reads a component's log
// and restarts it (as `kubectl rollout restart`).

import { api, componentLog, type Component } from './client';
import { confirmDialog, h, mount } from './dom';
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
