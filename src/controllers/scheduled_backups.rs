//! The instance's scheduled backups: every `--backup-check-secs` the leader checks whether
//! the Instance's `backupSchedule` wants a backup now (`backups::schedule`) and starts it
//! with Kairship's own credentials; what it saw goes to the status (`lastBackup`,
//! `BackupsHealthy`).

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::backups::schedule::{self, Seen};
use crate::backups::take::Request;
use crate::crd::LastBackup;
use crate::status::BACKUPS_CONDITION;

#[derive(Default)]
pub struct ScheduledBackups {
    /// `--backup-check-secs`, as the last look read it.
    every: std::time::Duration,
    /// The last backup the Instance's status names, for a check that has seen none.
    last_written: Option<LastBackup>,
}

impl Controller for ScheduledBackups {
    const NAME: &'static str = "scheduled-backups";
    type Found = Seen;

    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &Observed,
        report: &mut Report,
    ) -> Next<Seen> {
        // The latest Instance: a schedule change does not restart the actor.
        let latest = scope.latest();
        let Some(schedule) = latest.as_ref().and_then(|i| i.spec.backup_schedule.clone()) else {
            *report = Report::default();
            return Next::Idle;
        };
        self.last_written = latest.and_then(|i| i.status.as_ref()?.last_backup.clone());
        let settings = &scope.ctx.settings;
        self.every = settings.backup_check_every;
        let Some(client) = scope.client.filter(|_| scope.connected).cloned() else {
            return Next::Idle;
        };
        if report != &Report::default() && !scope.requeued() {
            return Next::Idle;
        }
        let req = Request {
            instance: scope.name.to_string(),
            karmada_version: observed.karmada_version.clone().unwrap_or_default(),
            requested_by: schedule::REQUESTED_BY.into(),
            scheduled: true,
            keep: Some(schedule.keep()),
        };
        let store = settings.backup_store(&scope.ctx.host);
        let timeout = settings.instance_call_timeout;
        Next::Start(Box::pin(async move {
            Ok(schedule::check(store, client, schedule, req, timeout).await)
        }))
    }

    fn record(&mut self, seen: Seen, report: &mut Report) -> Action {
        if let Some(why) = &seen.failing {
            tracing::warn!(error = %why, "scheduled backups are failing");
        }
        let last = seen
            .last_completed
            .as_ref()
            .map(|(name, completed)| LastBackup {
                name: name.clone(),
                completed: completed.clone(),
            });
        let said = last
            .as_ref()
            .map(|l| format!("the last backup, {}, completed at {}", l.name, l.completed));
        match (&seen.failing, said) {
            (Some(why), _) => report.say(BACKUPS_CONDITION, Some(false), "BackupFailed", why),
            (None, Some(last)) => report.say(BACKUPS_CONDITION, Some(true), "Completed", last),
            (None, None) => report.say(
                BACKUPS_CONDITION,
                None,
                "NoBackupYet",
                "no backup has completed yet",
            ),
        }
        report.last_backup = last.or_else(|| self.last_written.clone());
        Action::requeue(self.every)
    }
}
