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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::controllers::testing::{context, instance, mock, run, says, status, Look};
    use crate::controllers::Observed;

    /// The host's Instance with a backup schedule, and whether it refuses Secret writes.
    fn host(refuse: bool) -> (kube::Client, crate::controllers::testing::Calls) {
        mock(move |call| {
            if call
                .path
                .starts_with("/apis/kairship.io/v1alpha1/instances?")
            {
                let mut i = serde_json::to_value(instance("team-a")).unwrap_or_default();
                i["spec"]["backupSchedule"] = json!({"intervalMinutes": 60, "keep": 3});
                i["metadata"]["resourceVersion"] = json!("5");
                let items = vec![i];
                return Some((
                    200,
                    json!({"kind": "InstanceList", "apiVersion": "kairship.io/v1alpha1",
                           "metadata": {"resourceVersion": "5"}, "items": items}),
                ));
            }
            (refuse && call.method == "POST" && call.path.contains("/secrets"))
                .then(|| (403, status(403, "Forbidden", "secrets is forbidden")))
        })
    }

    async fn looking(host: kube::Client) -> Look {
        let settings = crate::context::Settings {
            backup_check_every: Duration::from_secs(60),
            ..Default::default()
        };
        let look = Look::new(instance("team-a"), context(host.clone(), settings)).connected(host);
        crate::controllers::testing::listed(&look).await;
        look
    }

    /// One check on a host that does or does not refuse Secret writes: what the controller
    /// then reports, and the controller and look for more.
    async fn checked(
        refuse: bool,
    ) -> (
        ScheduledBackups,
        Look,
        Report,
        crate::controllers::testing::Calls,
    ) {
        let (host, calls) = host(refuse);
        let look = looking(host).await;
        let (observed, mut report) = (Observed::default(), Report::default());
        let mut c = ScheduledBackups::default();
        let seen = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("checked");
        assert_eq!(
            c.record(seen, &mut report),
            Action::requeue(Duration::from_secs(60))
        );
        (c, look, report, calls)
    }

    #[tokio::test]
    async fn a_due_schedule_starts_a_backup_in_the_backup_namespace() {
        let (mut c, look, mut report, calls) = checked(false).await;
        let observed = Observed::default();
        let started: Vec<_> = calls
            .writes()
            .into_iter()
            .filter(|w| {
                w.path
                    .starts_with("/api/v1/namespaces/kairship-system/secrets")
            })
            .collect();
        assert!(!started.is_empty(), "a backup record: {:?}", calls.writes());
        assert_eq!(
            started[0].body["metadata"]["labels"]["kairship.io/backup-of"],
            "team-a"
        );
        says(&report, BACKUPS_CONDITION, None, "NoBackupYet", "no backup");
        assert!(
            crate::controllers::testing::idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "not again before its cadence"
        );
    }

    #[tokio::test]
    async fn a_backup_that_cannot_start_fails_the_condition_naming_why() {
        let (_, _, report, _) = checked(true).await;
        says(
            &report,
            BACKUPS_CONDITION,
            Some(false),
            "BackupFailed",
            "forbidden",
        );
    }
}
