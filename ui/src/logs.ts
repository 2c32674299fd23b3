// A log in a dialog of its own (the page beneath re-renders as it polls): the last 200
// lines, then, with Follow, lines as they come, from any log Kairship streams.

import type { LogSource } from './client';
import { h } from './dom';

export function openLog(title: string, where: string, source: LogSource) {
  const pre = h('pre', { class: 'log', 'aria-label': `log of ${title}` });
  const state = h('div', { class: 'muted' });
  const follow = h('input', { type: 'checkbox', checked: true }) as HTMLInputElement;
  let abort = new AbortController();
  const load = () => {
    abort.abort();
    abort = new AbortController();
    pre.textContent = '';
    state.textContent = follow.checked ? 'following…' : '';
    source({ tailLines: 200, follow: follow.checked, signal: abort.signal }, (t) => {
      pre.textContent += t;
      pre.scrollTop = pre.scrollHeight;
    })
      .then(() => (state.textContent = 'end of log'))
      .catch((e: Error) => {
        if (e.name !== 'AbortError') state.textContent = e.message;
      });
  };
  const overlay = h(
    'div',
    { class: 'overlay' },
    h(
      'div',
      { class: 'dialog wide', role: 'dialog', 'aria-label': `log of ${title}` },
      h('h3', {}, `${title} `, h('span', { class: 'muted' }, where)),
      pre,
      state,
      h(
        'div',
        { class: 'actions' },
        h('label', {}, follow, ' Follow'),
        h('button', { onclick: load }, 'Reload'),
        h('button', { onclick: () => (abort.abort(), overlay.remove()) }, 'Close'),
      ),
    ),
  );
  follow.addEventListener('change', load);
  document.body.appendChild(overlay);
  load();
}
