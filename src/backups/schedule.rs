//! Scheduled backups: whether the Instance's `backupSchedule` wants a backup now (the
//! newest scheduled one started an interval ago, or a failed one ten minutes ago), checked
//! by the `scheduled-backups` controller (`controllers::scheduled_backups`).

use std::time::Duration;

use super::take::{self, Request};
use super::{BackupError, Phase, Record, Store};
use crate::crd::BackupScheduleSpec;

/// Who a scheduled backup names as having asked for it.
pub const REQUESTED_BY: &str = "kairship (schedule)";
/// A failed scheduled backup is tried again after this (or the interval, if shorter).
pub const RETRY_FAILED: Duration = Duration::from_secs(600);

/// Whether a scheduled backup is due at `now`, given the instance's backups: none that
/// did not fail (scheduled or on request) started within the interval, and no scheduled
/// one failed within `RETRY_FAILED`.
pub fn due(records: &[Record], schedule: &BackupScheduleSpec, now: jiff::Timestamp) -> bool {
    let interval = Duration::from_secs(u64::from(schedule.interval_minutes) * 60);
    let within = |r: &Record, wait: Duration| {
        r.started_at()
            .is_some_and(|t| now.duration_since(t).unsigned_abs() < wait)
    };
    let recent = records
        .iter()
        .any(|r| r.phase != Phase::Failed && within(r, interval));
    let failed_lately = records
        .iter()
        .any(|r| r.scheduled && r.phase == Phase::Failed && within(r, interval.min(RETRY_FAILED)));
    !recent && !failed_lately
}

/// What a check saw of the instance's backups, for its status (`BackupsHealthy`,
/// `lastBackup`) and through it the metrics and alerts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Seen {
    /// The newest completed backup: its name and when it completed.
    pub last_completed: Option<(String, String)>,
    /// Why backups are failing: the newest scheduled backup failed, or the destination
    /// cannot be read or written.
    pub failing: Option<String>,
}

impl Seen {
    fn of(records: &[Record]) -> Self {
        let last_completed = records
            .iter()
            .filter(|r| r.phase == Phase::Completed)
            .max_by(|a, b| a.completed.cmp(&b.completed))
            .map(|r| (r.name.clone(), r.completed.clone()));
        let newest_scheduled = records
            .iter()
            .filter(|r| r.scheduled && r.phase != Phase::Running)
            .max_by(|a, b| a.started.cmp(&b.started));
        let failing = newest_scheduled
            .filter(|r| r.phase == Phase::Failed)
            .map(|r| format!("backup {} failed: {}", r.name, r.message));
        Self {
            last_completed,
            failing,
        }
    }
}

/// Takes a backup if one is due, and says what it saw of the instance's backups (a
/// failure to read or start them included).
pub async fn check(
    store: Store,
    client: kube::Client,
    schedule: BackupScheduleSpec,
    req: Request,
    call_timeout: Duration,
) -> Seen {
    run(store, client, schedule, req, call_timeout)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("scheduled backup: {e}");
            Seen {
                last_completed: None,
                failing: Some(e.to_string()),
            }
        })
}

async fn run(
    store: Store,
    client: kube::Client,
    schedule: BackupScheduleSpec,
    req: Request,
    call_timeout: Duration,
) -> Result<Seen, BackupError> {
    let records = store.list(&req.instance).await?;
    let seen = Seen::of(&records);
    if records.iter().any(|r| r.phase == Phase::Running)
        || !due(&records, &schedule, jiff::Timestamp::now())
    {
        return Ok(seen);
    }
    match take::start(store, client, req, call_timeout).await {
        Ok(started) => tracing::info!(backup = %started.name, "scheduled backup started"),
        // A backup that cannot start (the destination missing) fails the schedule.
        Err(e) => {
            return Ok(Seen {
                failing: Some(e.to_string()),
                ..seen
            })
        }
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().expect("valid in this test")
    }

    #[test]
    fn due_after_the_interval_and_sooner_after_a_failure() {
        let every_hour = BackupScheduleSpec {
            interval_minutes: 60,
            keep: None,
        };
        assert!(due(&[], &every_hour, at("2026-11-26T10:00:00Z")));
        let mut last = Record::start("a", at("2026-11-26T10:00:00Z"), "kairship", true);
        last.phase = Phase::Completed;
        let records = [last.clone()];
        assert!(!due(&records, &every_hour, at("2026-11-26T10:59:00Z")));
        assert!(due(&records, &every_hour, at("2026-11-26T11:00:00Z")));
        // A backup on request counts: the next scheduled one is an interval after it.
        let mut manual = Record::start("a", at("2026-11-26T10:50:00Z"), "alice", false);
        manual.phase = Phase::Completed;
        assert!(!due(
            &[last.clone(), manual],
            &every_hour,
            at("2026-11-26T11:00:00Z")
        ));
        last.phase = Phase::Failed;
        assert!(due(&[last], &every_hour, at("2026-11-26T10:10:00Z")));
    }
}
