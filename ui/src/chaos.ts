// The latest chaos report (`kairship chaos run` into the directory the server was given):
// each experiment with its goals marked, and the timeline picture.

import { ApiError, chaosReport, chaosPicture, type ChaosReport } from './client';
import { h, mount } from './dom';

function goalRows(r: ChaosReport) {
  return (r.experiments ?? []).map((e) =>
    h(
      'tr',
      { 'data-experiment': e.name ?? '' },
      h('td', {}, h('strong', {}, e.name ?? ''), h('div', { class: 'muted' }, e.description ?? '')),
      h('td', {}, e.victim ?? ''),
      h('td', { 'data-col': 'result', class: e.skipped ? 'muted' : e.passed ? 'ok' : 'error' }, e.skipped ? `skipped: ${e.skipped}` : e.passed ? 'passed' : 'failed'),
      h(
        'td',
        {},
        (e.goals ?? []).map((g) =>
          // A latency goal of the short profile is reported, not enforced: missing it is a warning.
          h('div', { class: g.ok ? 'goal ok' : g.enforced === false ? 'goal warn' : 'goal error', 'data-goal': g.name ?? '' }, g.ok ? '✓ ' : g.enforced === false ? '! ' : '✗ ', `${g.name}: ${g.actual} (goal ${g.target}${g.enforced === false ? ', reported only' : ''})`),
        ),
      ),
    ),
  );
}

/** Renders the page into `root` and loads the report (again on Reload: a report changes
 *  only when someone runs the experiments, so the page is not polled). */
export function chaosPage(root: Element) {
  const slot = h('div', { id: 'chaos' });
  let pictureUrl: string | undefined;
  const load = async () => {
    try {
      const report = await chaosReport();
      const svg = await chaosPicture().catch(() => undefined);
      if (pictureUrl) URL.revokeObjectURL(pictureUrl);
      pictureUrl = svg ? URL.createObjectURL(new Blob([svg], { type: 'image/svg+xml' })) : undefined;
      mount(
        slot,
        h('p', {}, `Profile ${report.profile ?? ''}: `, h('strong', { class: report.passed ? 'ok' : 'error', 'data-passed': String(!!report.passed) }, report.passed ? 'every goal held' : 'some goals did not hold')),
        h('table', { class: 'grid', id: 'chaos-table' }, h('thead', {}, h('tr', {}, ['Experiment', 'Victim', 'Result', 'Goals'].map((t) => h('th', {}, t)))), h('tbody', {}, goalRows(report))),
        pictureUrl && h('img', { class: 'chaos-picture', src: pictureUrl, alt: 'healthy p99 over time with each fault window shaded' }),
      );
    } catch (e) {
      const text = e instanceof ApiError ? e.message : String((e as Error)?.message ?? e);
      mount(slot, h('p', { class: e instanceof ApiError && e.status === 403 ? 'error' : 'muted', id: 'chaos-missing' }, text));
    }
  };
  mount(root, h('h2', {}, 'Chaos report ', h('button', { class: 'small', onclick: () => void load() }, 'Reload')), slot);
  void load();
}
