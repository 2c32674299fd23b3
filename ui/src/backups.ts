// An instance's backups: listed with their phase and progress; an admin takes one now,
// restores one (what is missing is created, what exists is left), deletes one, and sets
// the schedule (every N minutes, the newest kept).

import { api, type Backup, type Instance } from './client';
import { confirmDialog, h, mount, numberDialog } from './dom';

function size(bytes: number) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function rows(inst: string, list: Backup[], canAdmin: boolean, done: () => void, report: (e: unknown) => void) {
  return list.map((b) => {
    const name = b.name ?? '';
    const restore = async () => {
      const why = `Objects of ${inst} that the backup holds and the instance lacks are created as you; objects that exist are left as they are. Karmada then places the templates again.`;
      if (!(await confirmDialog(`Restore ${name}?`, why, 'Restore'))) return;
      try {
        const r = await api.restoreBackup(inst, name, '');
        const failed = (r.failures ?? []).join('; ');
        report(new Error(`Restored: ${r.created ?? 0} created, ${r.existing ?? 0} already there, ${r.failed ?? 0} failed${failed ? `: ${failed}` : ''}.`));
      } catch (e) {
        report(e);
      }
      done();
    };
    const remove = async () => {
      if (!(await confirmDialog(`Delete ${name}?`, 'Its Secrets are deleted; it cannot be restored afterwards.', 'Delete'))) return;
      try {
        await api.deleteBackup(inst, name);
      } catch (e) {
        report(e);
      }
      done();
    };
    const completed = b.phase === 'Completed';
    return h(
      'tr',
      { 'data-backup': name, 'data-phase': b.phase ?? '' },
      h('td', {}, name, h('div', { class: 'muted' }, b.scheduled ? 'scheduled' : `by ${b.requestedBy ?? ''}`)),
      h('td', {}, b.phase ?? '', b.message && h('div', { class: 'muted' }, b.message)),
      h('td', {}, b.started ?? ''),
      h('td', {}, String(b.objects ?? 0)),
      h('td', {}, size(Number(b.sizeBytes ?? 0))),
      h(
        'td',
        {},
        canAdmin && completed && h('button', { class: 'small', onclick: () => void restore() }, 'Restore'),
        canAdmin && b.phase !== 'Running' && h('button', { class: 'small', onclick: () => void remove() }, 'Delete'),
      ),
    );
  });
}

/** Fills `slot` with the instance's backups (or why they cannot be read). */
export async function showBackups(slot: Element, i: Instance, canAdmin: boolean, done: () => void, report: (e: unknown) => void) {
  const inst = i.metadata?.name ?? '';
  const schedule = i.spec?.backupSchedule;
  const take = async () => {
    try {
      await api.createBackup(inst);
    } catch (e) {
      report(e);
    }
    done();
  };
  const scheduleIt = async () => {
    const why = 'Minutes between backups (0: none). A backup on request counts; the newest 7 are kept unless set otherwise.';
    const n = await numberDialog(`Back up ${inst} every`, why, schedule?.intervalMinutes ?? 1440, 0, 10080, 1);
    if (n === null) return;
    try {
      await api.setBackupSchedule(inst, n, schedule?.keep ?? 0);
    } catch (e) {
      report(e);
    }
    done();
  };
  const heading = h(
    'h3',
    {},
    'Backups ',
    canAdmin && h('button', { class: 'small', id: 'create-backup', onclick: () => void take() }, 'Back up now'),
    canAdmin && h('button', { class: 'small', id: 'backup-schedule', onclick: () => void scheduleIt() }, 'Schedule'),
  );
  const when = h('p', { class: 'muted', id: 'backup-schedule-text' }, schedule?.intervalMinutes ? `Every ${schedule.intervalMinutes} minutes, the newest ${schedule.keep ?? 7} kept.` : 'Not scheduled.');
  try {
    const list = await api.backups(inst);
    const table = h(
      'table',
      { id: 'backups' },
      h('thead', {}, h('tr', {}, ['Backup', 'Phase', 'Started', 'Objects', 'Size', ''].map((t) => h('th', {}, t)))),
      h('tbody', {}, rows(inst, list, canAdmin, done, report)),
    );
    mount(slot, heading, when, list.length === 0 ? h('p', { class: 'muted' }, 'No backups.') : table);
  } catch (e) {
    mount(slot, heading, when, h('p', { class: 'muted' }, `Backups are not readable: ${(e as Error).message}`));
  }
}
