// Fleet rollouts: each FleetRollout with its phase and why, and every instance's step in
// its waves (backed up, upgrading, soaking, done, failed, rolled back). Admins of the
// whole fleet pause, resume and abort them; starting one is `kairship ctl rollouts start`.

import { api, type S } from './client';
import { confirmDialog, h } from './dom';

type Rollout = S['kairship.v1alpha1.Rollout'];

const stepClass: Record<string, string> = { Done: 'ok', Failed: 'error', RolledBack: 'error' };

function steps(r: Rollout) {
  return h(
    'table',
    { class: 'grid', 'data-rollout-steps': r.name ?? '' },
    h('thead', {}, h('tr', {}, ['Wave', 'Instance', 'Step', 'Since', 'From', 'Backup', 'Why'].map((t) => h('th', {}, t)))),
    h(
      'tbody',
      {},
      (r.waves ?? []).flatMap((w, i) =>
        (w.instances ?? []).map((x) =>
          h(
            'tr',
            { 'data-instance': x.name ?? '' },
            h('td', {}, String(i + 1)),
            h('td', {}, h('a', { href: `#/instances/${encodeURIComponent(x.name ?? '')}` }, x.name ?? '')),
            h('td', { 'data-col': 'step', class: stepClass[x.step ?? ''] ?? '' }, x.step ?? ''),
            h('td', { class: 'muted' }, x.since ?? ''),
            h('td', {}, x.fromVersion ?? ''),
            h('td', { class: 'muted' }, x.backup ?? ''),
            h('td', { class: 'why' }, x.reason ?? ''),
          ),
        ),
      ),
    ),
  );
}

/** The rollouts, each with its steps; `admin`: may steer them. */
export function rolloutsView(rollouts: Rollout[], admin: boolean, after: () => void, report: (e: unknown) => void) {
  if (!rollouts.length) return h('p', { class: 'muted', id: 'rollouts' }, 'No rollouts. Plan and start one with kairship ctl rollouts plan | start.');
  const steer = async (r: Rollout, action: 'pause' | 'resume' | 'abort') => {
    if (action === 'abort') {
      const ok = await confirmDialog(`Abort rollout ${r.name}?`, 'Nothing new starts again; what changed stays changed.', 'Abort');
      if (!ok) return;
    }
    try {
      await api.steerRollout(r.name ?? '', action);
      after();
    } catch (e) {
      report(e);
    }
  };
  return h(
    'div',
    { id: 'rollouts' },
    rollouts.map((r) => {
      const all = (r.waves ?? []).flatMap((w) => w.instances ?? []);
      const done = all.filter((x) => x.step === 'Done').length;
      const over = r.aborted || r.phase === 'Completed';
      return h(
        'section',
        { class: 'rollout', 'data-rollout': r.name ?? '' },
        h(
          'h3',
          {},
          `${r.name} → ${r.spec?.karmadaVersion ?? ''} `,
          h('span', { 'data-col': 'phase', class: r.phase === 'Halted' ? 'error' : r.phase === 'Completed' ? 'ok' : '' }, r.phase ?? ''),
          ` · ${done}/${all.length} done`,
        ),
        r.reason && h('p', { class: 'why', 'data-col': 'reason' }, r.reason),
        admin &&
          !over &&
          h(
            'p',
            {},
            r.paused
              ? h('button', { class: 'small', onclick: () => void steer(r, 'resume') }, 'Resume')
              : h('button', { class: 'small', onclick: () => void steer(r, 'pause') }, 'Pause'),
            ' ',
            h('button', { class: 'small danger', onclick: () => void steer(r, 'abort') }, 'Abort'),
          ),
        steps(r),
      );
    }),
  );
}
