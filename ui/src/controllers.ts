// An instance's controllers as the replica that answered runs them: switched on
// (--controllers), running there (leader-only controllers run on the leader), failures
// retried with backoff, the last success and the last error.

import { api } from './client';
import { h, mount } from './dom';

export async function showControllers(slot: HTMLElement, inst: string) {
  const title = h('h3', {}, 'Controllers');
  try {
    const r = await api.controllers(inst);
    const yes = (b: boolean | undefined) => (b ? 'yes' : 'no');
    mount(
      slot,
      title,
      h('p', { class: 'muted' }, `As replica ${r.replica ?? ''} runs them; leader-only controllers run on the leader.`),
      h(
        'table',
        { class: 'grid', id: 'controllers' },
        h('thead', {}, h('tr', {}, ['Controller', 'What it does', 'On', 'Runs here', 'Failures', 'Last success', 'Last error'].map((t) => h('th', {}, t)))),
        h(
          'tbody',
          {},
          (r.controllers ?? []).map((c) =>
            h(
              'tr',
              { 'data-controller': c.name ?? '' },
              h('td', {}, c.name ?? ''),
              h('td', { class: 'muted' }, c.description ?? ''),
              h('td', { 'data-col': 'enabled' }, yes(c.enabled)),
              h('td', { 'data-col': 'active' }, yes(c.active)),
              h('td', { 'data-col': 'failures' }, c.failures ?? 0),
              h('td', { 'data-col': 'succeeded' }, c.lastSucceeded ?? ''),
              h('td', { class: 'why' }, c.lastError ?? ''),
            ),
          ),
        ),
      ),
    );
  } catch (e) {
    mount(slot, title, h('p', { class: 'muted' }, `Not readable: ${(e as Error).message}`));
  }
}
