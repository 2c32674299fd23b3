// Fleet search: one query across every instance the signed-in user may view. A query with
// `=`, `!=`, `in` or `notin` is a label selector (`app=payments`); anything else looks for
// that text in names. Results link to the workload on its instance's page.

import { api, ApiError, type SearchHit } from './client';
import { h, mount } from './dom';

function looksLikeSelector(q: string): boolean {
  return /(=|!=| in | notin |^!)/.test(q);
}

function hitRows(hits: SearchHit[]) {
  return hits.map((hit) => {
    const id = hit.namespace ? `${hit.namespace}/${hit.name}` : hit.name ?? '';
    const workload = hit.placement !== undefined && hit.namespace;
    const href = workload
      ? `#/instances/${encodeURIComponent(hit.instance ?? '')}/workloads/${encodeURIComponent(hit.namespace ?? '')}/${encodeURIComponent(hit.name ?? '')}`
      : `#/instances/${encodeURIComponent(hit.instance ?? '')}`;
    const clusters = (hit.placement?.clusters ?? []).map((c) => `${c.name}: ${c.replicas ?? 0}`).join(', ');
    return h(
      'tr',
      { 'data-hit': `${hit.instance}/${hit.kind}/${id}` },
      h('td', {}, h('a', { href: `#/instances/${encodeURIComponent(hit.instance ?? '')}` }, hit.instance ?? '')),
      h('td', {}, hit.kind ?? ''),
      h('td', {}, h('a', { href }, id)),
      h('td', {}, workload ? `${hit.readyReplicas ?? 0}/${hit.replicas ?? 0}` : ''),
      h('td', {}, clusters),
      h('td', { class: 'muted' }, Object.entries(hit.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ')),
    );
  });
}

export function searchPage(root: Element, q: string) {
  const results = h('div', { id: 'search-results' });
  mount(root, h('h2', {}, `Search: ${q}`), results);
  const params: Record<string, string> = looksLikeSelector(q) ? { label_selector: q } : { name: q, name_match: 'NAME_MATCH_SUBSTRING' };
  const here = location.hash;
  // An instance that could not answer now (busy, over the caller's share) is asked again a
  // few times, a little later, while the page stays open.
  const run = (left: number) =>
    api
      .search(params)
      .then((r) => {
        if (location.hash !== here) return;
        const hits = r.hits ?? [];
        const missing = r.unavailableInstances ?? [];
        const notes = [
          r.filtered && h('p', { class: 'muted' }, 'Some objects were left out: an instance does not let you list them.'),
          missing.length > 0 && h('p', { class: 'muted' }, `Not searched now: ${missing.join(', ')}${left > 0 ? ' (asking again)' : ''}.`),
        ];
        if (missing.length > 0 && left > 0) window.setTimeout(() => void run(left - 1), 2000);
        if (hits.length === 0) return mount(results, h('p', { class: 'muted' }, 'Nothing found.'), ...notes);
        const header = h('tr', {}, ...['Instance', 'Kind', 'Object', 'Ready', 'Placement', 'Labels'].map((c) => h('th', {}, c)));
        mount(results, h('table', { id: 'hits' }, h('thead', {}, header), h('tbody', {}, ...hitRows(hits))), ...notes);
      })
      .catch((e) => mount(results, h('p', { class: 'error', role: 'alert' }, e instanceof ApiError ? `${e.status}: ${e.message}` : String(e))));
  void run(3);
}

/** The search box in the header: Enter opens the results page. */
export function searchBox() {
  const input = h('input', { type: 'search', id: 'search', placeholder: 'Search the fleet (app=payments, or a name)', autocomplete: 'off' }) as HTMLInputElement;
  const form = h('form', { class: 'search' }, input);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = input.value.trim();
    if (q) location.hash = `#/search?q=${encodeURIComponent(q)}`;
  });
  return form;
}
