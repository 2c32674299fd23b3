//! The instance's scheduled backups: every `--backup-check-secs` the leader checks whether
//! the Instance's `backupSchedule` wants a backup now (`backups::schedule`) and starts it
//! with Kairship's own credentials; what it saw goes to the status (`lastBackup`,
//! `BackupsHealthy`).

use super::{Controller, Scope, Work};
use crate::backups::schedule::{self, Seen};
use crate::backups::take::Request;
use crate::status::Observed;

#[derive(Default)]
pub struct ScheduledBackups;

impl Controller for ScheduledBackups {
    const NAME: &'static str = "scheduled-backups";
    type Found = Seen;

    fn reconcile(&mut self, scope: &Scope<'_>, observed: &mut Observed) -> Option<Work<Seen>> {
        // The latest Instance: a schedule change does not restart the actor.
        let Some(schedule) = scope.latest().and_then(|i| i.spec.backup_schedule.clone()) else {
            observed.backups = None;
            return None;
        };
        let settings = &scope.ctx.settings;
        let client = scope.client.filter(|_| scope.connected)?.clone();
        if !scope.due(Self::NAME, settings.backup_check_every) {
            return None;
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
        Some(Box::pin(async move {
            Ok(schedule::check(store, client, schedule, req, timeout).await)
        }))
    }

    fn record(&mut self, seen: Seen, observed: &mut Observed) {
        if let Some(why) = &seen.failing {
            tracing::warn!(error = %why, "scheduled backups are failing");
        }
        observed.backups = Some(seen);
    }
}
