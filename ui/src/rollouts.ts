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

/** The waves as a picture: a row per wave, a square per instance coloured by its step
 * (named in its title and label), the wave under way marked. */
function picture(r: Rollout) {
  const waves = r.waves ?? [];
  const current = waves.findIndex((w) => (w.instances ?? []).some((x) => x.step !== 'Done'));
  return h(
    'div',
    { class: 'waves', 'data-waves': r.name ?? '', role: 'img', 'aria-label': `${r.name}: ${waves.length} waves` },
    waves.map((w, i) => {
      const xs = w.instances ?? [];
      const done = xs.filter((x) => x.step === 'Done').length;
      return h(
        'div',
        { class: i === current ? 'wave current' : 'wave', 'data-wave': String(i + 1) },
        h('span', { class: 'wave-label' }, `Wave ${i + 1} · ${done}/${xs.length}`),
        h(
          'span',
          { class: 'cells' },
          xs.map((x) =>
            h('span', {
              class: `cell step-${(x.step ?? 'Pending').toLowerCase()}`,
              'data-cell': x.name ?? '',
              'data-step': x.step ?? '',
              title: `${x.name}: ${x.step}${x.reason ? ` (${x.reason})` : ''}`,
            }),
          ),
        ),
      );
    }),
    h(
      'p',
      { class: 'legend muted' },
      ['Pending', 'BackingUp', 'Upgrading', 'Soaking', 'Done', 'Failed', 'RolledBack'].map((s) =>
        h('span', {}, h('span', { class: `cell step-${s.toLowerCase()}` }), ` ${s} `),
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
        picture(r),
        steps(r),
      );
    }),
  );
}
