//! Where an instance actor is in its life. The state changes only in [`Lifecycle::on`];
//! the status phase and whether the API may read the instance follow from it.
//!
//! ```text
//!  Connecting --Connected--> Syncing --CachesSynced--> Serving
//!      ^  |                     |  ^                     |  ^
//!      '--' ConnectFailed       |  '-- ProbeAnswered ----|--'  (back to Syncing or Serving,
//!                               v                        v      as the caches were)
//!                     Unreachable <----- ProbesFailed ------
//!                     Degraded    <----- Faults(Some) ------   (Faults(None) goes back)
//! ```

use crate::crd::Phase;

/// What a failed connect found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The instance could not be reached, or its kubeconfig is not usable yet.
    Dialing,
    /// A managed control plane karmada-operator has not finished.
    Provisioning,
    /// A managed control plane karmada-operator is upgrading.
    Upgrading,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Lifecycle {
    /// No client yet: `attempts` connects failed so far, the last one finding `wait`.
    Connecting {
        attempts: u32,
        wait: Wait,
        why: Option<String>,
    },
    /// Connected; not every cache has completed its first list. `answered` once a probe
    /// has.
    Syncing { answered: bool },
    /// Connected, synced and answering.
    Serving,
    /// Answering probes, but a cache's watch has kept failing (a Karmada CRD missing, a
    /// resource the instance refuses to list: reads of that kind would be stale or
    /// empty), or a managed instance's component cannot run (crash loop, image pull).
    Degraded { synced: bool, why: String },
    /// Probes failed `Settings::unreachable_after` times in a row.
    Unreachable { synced: bool, why: String },
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::Connecting {
            attempts: 0,
            wait: Wait::Dialing,
            why: None,
        }
    }
}

/// What the actor learned, in the order it may learn it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    ConnectFailed {
        wait: Wait,
        why: String,
    },
    Connected,
    CachesSynced,
    ProbeAnswered,
    /// Enough probes failed in a row to call the instance unreachable.
    ProbesFailed(String),
    /// While the instance answers, something keeps it from serving well (`Some`): a
    /// cache's watch has failed for too long, or a control plane component cannot run;
    /// or nothing does (`None`).
    Faults(Option<String>),
}

impl Lifecycle {
    /// The state after `event`. Events that do not apply to the current state (a late
    /// probe answer while connecting, a watch report while unreachable) leave it as it is.
    pub fn on(self, event: Event) -> Self {
        use Lifecycle::*;
        match (self, event) {
            (Connecting { attempts, .. }, Event::ConnectFailed { wait, why }) => Connecting {
                attempts: attempts.saturating_add(1),
                wait,
                why: Some(why),
            },
            (_, Event::Connected) => Syncing { answered: false },
            (s @ Connecting { .. }, _) => s,

            (Syncing { .. }, Event::CachesSynced) => Serving,
            (Degraded { why, .. }, Event::CachesSynced) => Degraded { synced: true, why },
            (Unreachable { why, .. }, Event::CachesSynced) => Unreachable { synced: true, why },

            (Syncing { .. }, Event::ProbeAnswered) => Syncing { answered: true },
            (Unreachable { synced: true, .. }, Event::ProbeAnswered) => Serving,
            (Unreachable { synced: false, .. }, Event::ProbeAnswered) => Syncing { answered: true },

            (s @ (Syncing { .. } | Serving | Degraded { .. }), Event::ProbesFailed(why)) => {
                Unreachable {
                    synced: s.synced(),
                    why,
                }
            }

            (s @ (Syncing { .. } | Serving | Degraded { .. }), Event::Faults(Some(why))) => {
                Degraded {
                    synced: s.synced(),
                    why,
                }
            }
            (Degraded { synced: true, .. }, Event::Faults(None)) => Serving,
            (Degraded { synced: false, .. }, Event::Faults(None)) => Syncing { answered: true },

            (s, _) => s,
        }
    }

    /// Every cache has completed its first list.
    pub fn synced(&self) -> bool {
        match self {
            Self::Connecting { .. } | Self::Syncing { .. } => false,
            Self::Serving => true,
            Self::Degraded { synced, .. } | Self::Unreachable { synced, .. } => *synced,
        }
    }

    pub fn connected(&self) -> bool {
        !matches!(self, Self::Connecting { .. })
    }

    /// The last probe answered: `Some(false)` once unreachable, `None` before any answer.
    pub fn reachable(&self) -> Option<bool> {
        match self {
            Self::Connecting { .. } | Self::Syncing { answered: false } => None,
            Self::Unreachable { .. } => Some(false),
            Self::Syncing { answered: true } | Self::Serving | Self::Degraded { .. } => Some(true),
        }
    }

    /// Reconnects so far, for the backoff of the next.
    pub fn connect_attempts(&self) -> u32 {
        match self {
            Self::Connecting { attempts, .. } => *attempts,
            _ => 0,
        }
    }

    pub fn phase(&self) -> Phase {
        match self {
            Self::Connecting {
                wait: Wait::Provisioning,
                ..
            } => Phase::Provisioning,
            Self::Connecting {
                wait: Wait::Upgrading,
                ..
            } => Phase::Upgrading,
            Self::Connecting { .. } | Self::Syncing { .. } => Phase::Pending,
            Self::Serving => Phase::Running,
            Self::Degraded { .. } => Phase::Degraded,
            Self::Unreachable { .. } => Phase::Unreachable,
        }
    }

    /// Why the instance is not serving, in words for a status message.
    pub fn why(&self) -> Option<&str> {
        match self {
            Self::Connecting { why, .. } => why.as_deref(),
            Self::Degraded { why, .. } | Self::Unreachable { why, .. } => Some(why),
            Self::Syncing { .. } | Self::Serving => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: impl IntoIterator<Item = Event>) -> Lifecycle {
        events
            .into_iter()
            .fold(Lifecycle::default(), |s, e| s.on(e))
    }

    fn failed(wait: Wait) -> Event {
        Event::ConnectFailed {
            wait,
            why: "no".into(),
        }
    }

    #[test]
    fn connects_syncs_and_serves() {
        let s = run([failed(Wait::Dialing), failed(Wait::Provisioning)]);
        assert_eq!(s.connect_attempts(), 2);
        assert_eq!(s.phase(), Phase::Provisioning);
        assert_eq!(run([failed(Wait::Upgrading)]).phase(), Phase::Upgrading);
        let s = run([failed(Wait::Dialing), Event::Connected]);
        assert_eq!((s.phase(), s.connect_attempts()), (Phase::Pending, 0));
        assert_eq!(s.reachable(), None, "no probe has answered yet");
        let s = s.on(Event::ProbeAnswered);
        assert_eq!((s.phase(), s.reachable()), (Phase::Pending, Some(true)));
        let s = s.on(Event::CachesSynced);
        assert_eq!((s.clone(), s.phase()), (Lifecycle::Serving, Phase::Running));
    }

    #[test]
    fn nothing_but_a_connection_leaves_connecting() {
        for e in [
            Event::CachesSynced,
            Event::ProbeAnswered,
            Event::ProbesFailed("x".into()),
            Event::Faults(Some("x".into())),
        ] {
            assert_eq!(run([e.clone()]), Lifecycle::default(), "{e:?}");
        }
    }

    #[test]
    fn unreachable_comes_back_to_where_the_caches_were() {
        let down = Event::ProbesFailed("timed out".into());
        let s = run([Event::Connected, Event::CachesSynced, down.clone()]);
        assert_eq!(
            (s.phase(), s.why()),
            (Phase::Unreachable, Some("timed out"))
        );
        assert_eq!(s.reachable(), Some(false));
        assert_eq!(s.on(Event::ProbeAnswered), Lifecycle::Serving);

        let s = run([Event::Connected, down]);
        assert!(!s.synced());
        assert_eq!(
            s.clone().on(Event::ProbeAnswered),
            Lifecycle::Syncing { answered: true }
        );
        let s = s.on(Event::CachesSynced).on(Event::ProbeAnswered);
        assert_eq!(s, Lifecycle::Serving, "caches synced while it was down");
    }

    #[test]
    fn failing_watches_degrade_only_an_answering_instance() {
        let failing = Event::Faults(Some("clusters: 404".into()));
        let s = run([Event::Connected, Event::CachesSynced, failing.clone()]);
        assert_eq!(
            (s.phase(), s.why()),
            (Phase::Degraded, Some("clusters: 404"))
        );
        assert_eq!(s.reachable(), Some(true));
        assert_eq!(s.clone().on(Event::Faults(None)), Lifecycle::Serving);
        let down = s.on(Event::ProbesFailed("refused".into()));
        assert_eq!(down.phase(), Phase::Unreachable, "unreachable wins");
        assert_eq!(down.clone().on(failing.clone()), down, "and stays");

        // Never synced (the instance lacks a Karmada CRD): degraded, then syncing again.
        let s = run([Event::Connected, Event::ProbeAnswered, failing]);
        assert_eq!((s.phase(), s.synced()), (Phase::Degraded, false));
        let s = s.on(Event::CachesSynced);
        assert_eq!(s.phase(), Phase::Degraded, "synced, but still failing");
        assert_eq!(s.on(Event::Faults(None)), Lifecycle::Serving);
    }

    #[test]
    fn a_new_connection_starts_over() {
        let s = run([Event::Connected, Event::CachesSynced, Event::Connected]);
        assert_eq!(s, Lifecycle::Syncing { answered: false });
    }
}
