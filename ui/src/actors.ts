// The supervision tree: each actor under its parent, with state, restarts, last error and
// uptime; an instance actor can be restarted by an admin after a confirmation.

import { api, atLeast, type Actor, type Roles } from './client';
import { age, confirmDialog, h } from './dom';

function depthOf(a: Actor, byName: Map<string, Actor>): number {
  let d = 0;
  let p = a.parent;
  while (p && byName.has(p) && d < 10) {
    d += 1;
    p = byName.get(p)?.parent;
  }
  return d;
}

/** Parents before children, siblings by name. */
function treeOrder(actors: Actor[]): Actor[] {
  const children = new Map<string, Actor[]>();
  const names = new Set(actors.map((a) => a.name));
  for (const a of actors) {
    const parent = a.parent && names.has(a.parent) ? a.parent : '';
    children.set(parent, [...(children.get(parent) ?? []), a]);
  }
  const out: Actor[] = [];
  const walk = (parent: string) => {
    for (const a of (children.get(parent) ?? []).sort((x, y) => (x.name ?? '').localeCompare(y.name ?? ''))) {
      out.push(a);
      if (a.name) walk(a.name);
    }
  };
  walk('');
  return out;
}

export function actorsTable(actors: Actor[], roles: Roles, after: () => void, report: (e: unknown) => void) {
  const byName = new Map(actors.map((a) => [a.name ?? '', a]));
  const restart = async (a: Actor) => {
    const inst = a.instance ?? '';
    const ok = await confirmDialog(
      `Restart the actor of ${inst}?`,
      `The actor ${a.name} stops and starts again: its caches relist from ${inst}, which answers UNAVAILABLE until they have synced. Other instances are not affected.`,
      `Restart ${inst}`,
    );
    if (!ok) return;
    try {
      await api.restart(inst);
      after();
    } catch (e) {
      report(e);
    }
  };
  return h(
    'table',
    { class: 'grid', id: 'actors' },
    h('thead', {}, h('tr', {}, ['Actor', 'State', 'Restarts (failures)', 'Restarts (requested)', 'Last error', 'Uptime', 'Replica', ''].map((t) => h('th', {}, t)))),
    h(
      'tbody',
      {},
      treeOrder(actors).map((a) =>
        h(
          'tr',
          { 'data-actor': a.name ?? '', 'data-instance': a.instance ?? '' },
          h('td', { style: `padding-left:${0.6 + depthOf(a, byName) * 1.4}em` }, depthOf(a, byName) > 0 ? '└ ' : '', a.name ?? ''),
          h('td', {}, h('span', { class: `phase phase-${(a.state ?? '').toLowerCase()}` }, a.state ?? '')),
          h('td', { 'data-col': 'restarts' }, a.restartCount ?? 0),
          h('td', { 'data-col': 'requested' }, a.requestedRestarts ?? 0),
          h('td', { class: 'why' }, a.lastError ?? ''),
          h('td', {}, age(Number(a.uptimeSeconds ?? 0))),
          h('td', { class: 'muted' }, a.replica ?? ''),
          h('td', {}, a.instance && atLeast(roles.on(a.instance), 'admin') && h('button', { class: 'small danger', onclick: () => restart(a) }, 'Restart')),
        ),
      ),
    ),
  );
}
