//! What Kairship keeps about one backup: its phase, progress, size and contents, stored as
//! an annotation of the backup's first Secret, and the API's view of it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::proto;

/// A running backup writes its progress at least this often.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A Running backup silent this long was abandoned (its replica stopped).
pub const ABANDONED_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Phase {
    #[default]
    Running,
    Completed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub name: String,
    pub instance: String,
    pub phase: Phase,
    #[serde(default)]
    pub message: String,
    pub started: String,
    #[serde(default)]
    pub completed: String,
    /// When a Running backup last wrote its progress.
    #[serde(default)]
    pub heartbeat: String,
    /// Failed as read because its progress stopped (the replica taking it stopped), not
    /// by an error of its own: worth taking again.
    #[serde(skip)]
    pub abandoned: bool,
    #[serde(default)]
    pub size_bytes: u64,
    #[serde(default)]
    pub objects: u64,
    #[serde(default)]
    pub resources: BTreeMap<String, u64>,
    #[serde(default)]
    pub karmada_version: String,
    #[serde(default)]
    pub scheduled: bool,
    #[serde(default)]
    pub requested_by: String,
    /// Secrets holding the data, after the first.
    #[serde(default)]
    pub parts: u32,
}

impl Record {
    /// A new backup of `instance` starting `now`; its name sorts by time.
    pub fn start(
        instance: &str,
        now: jiff::Timestamp,
        requested_by: &str,
        scheduled: bool,
    ) -> Self {
        let stamp = now.strftime("%Y%m%d-%H%M%S-%3f").to_string();
        let now = now.to_string();
        Self {
            name: format!("{}{instance}-{stamp}", super::store::PREFIX),
            instance: instance.to_string(),
            phase: Phase::Running,
            message: "starting".into(),
            started: now.clone(),
            heartbeat: now,
            requested_by: requested_by.to_string(),
            scheduled,
            ..Default::default()
        }
    }

    /// As read at `now`: a Running backup whose progress stopped is Failed.
    pub fn as_seen(mut self, now: jiff::Timestamp) -> Self {
        if self.phase != Phase::Running {
            return self;
        }
        let beat = self
            .heartbeat
            .parse::<jiff::Timestamp>()
            .or_else(|_| self.started.parse::<jiff::Timestamp>());
        let silent = beat.map_or(true, |b| {
            now.duration_since(b).unsigned_abs() > ABANDONED_AFTER
        });
        if silent {
            self.phase = Phase::Failed;
            self.abandoned = true;
            self.message = format!(
                "abandoned: no progress since {} (the Kairship replica taking it stopped); last: {}",
                self.heartbeat, self.message
            );
        }
        self
    }

    pub fn started_at(&self) -> Option<jiff::Timestamp> {
        self.started.parse().ok()
    }

    pub fn to_proto(&self) -> proto::Backup {
        let n = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
        proto::Backup {
            name: self.name.clone(),
            instance: self.instance.clone(),
            phase: format!("{:?}", self.phase),
            message: self.message.clone(),
            started: self.started.clone(),
            completed: self.completed.clone(),
            size_bytes: i64::try_from(self.size_bytes).unwrap_or(i64::MAX),
            objects: n(self.objects),
            resources: self
                .resources
                .iter()
                .map(|(k, v)| (k.clone(), n(*v)))
                .collect(),
            karmada_version: self.karmada_version.clone(),
            scheduled: self.scheduled,
            requested_by: self.requested_by.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_running_backup_reads_as_failed() {
        let t0: jiff::Timestamp = "2026-11-26T10:00:00Z".parse().expect("valid in this test");
        let r = Record::start("team-a", t0, "alice", false);
        assert!(r
            .name
            .starts_with("kairship-backup-team-a-20261126-100000-"));
        let soon = t0 + jiff::SignedDuration::from_secs(30);
        assert_eq!(r.clone().as_seen(soon).phase, Phase::Running);
        let late = t0 + jiff::SignedDuration::from_secs(61);
        let seen = r.as_seen(late);
        assert_eq!(seen.phase, Phase::Failed);
        assert!(seen.message.starts_with("abandoned"), "{}", seen.message);
        assert!(seen.abandoned);
    }
}
