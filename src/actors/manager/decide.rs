//! What the manager does for one Instance it sees (an add, a change, a leadership or
//! membership change): a pure function of what it knows, tested table-driven, that the
//! manager then carries out (`InstanceManager::apply`).

/// Work scheduled for a child, so a duplicate trigger does not schedule it twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    Nothing,
    /// A restart after a failure, delayed by the backoff.
    Respawn,
    /// The leader's cleanup of a deleted Instance.
    Cleanup,
}

/// What the manager knows of one Instance and its actor when it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub deleting: bool,
    pub has_finalizer: bool,
    /// This replica does the leader-only work for it (it leads, or owns it when sharded).
    pub leader: bool,
    pub paused: bool,
    pub asleep: bool,
    /// Sharded, and another replica runs it.
    pub owned_elsewhere: bool,
    /// What its actor was started from changed.
    pub spec_changed: bool,
    /// Its restart annotation has a value not acted on yet.
    pub restart_requested: bool,
    /// Its actor runs here.
    pub running: bool,
    pub pending: Pending,
    /// It failed too often; only the backoff's retry starts it again.
    pub degraded: bool,
}

/// One thing to do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Stop its actor, if one runs, saying why.
    Stop(&'static str),
    /// Remove what Kairship made for it, then its finalizer.
    Cleanup,
    AddFinalizer,
    /// A fresh actor with a clean restart history.
    Restart,
    Spawn,
}

pub fn decide(s: &Seen) -> Vec<Effect> {
    if s.deleting {
        let mut out = vec![Effect::Stop("instance is being deleted")];
        if s.leader && s.has_finalizer && s.pending != Pending::Cleanup {
            out.push(Effect::Cleanup);
        }
        return out;
    }
    let mut out = Vec::new();
    if s.leader && !s.has_finalizer {
        out.push(Effect::AddFinalizer);
    }
    let stop = match () {
        _ if s.restart_requested && !s.paused => {
            out.push(Effect::Restart);
            return out;
        }
        _ if s.paused => Some("instance is paused"),
        _ if s.asleep => Some("instance is hibernating"),
        _ if s.owned_elsewhere => Some("owned by another replica"),
        _ => None,
    };
    if let Some(why) = stop {
        out.push(Effect::Stop(why));
        return out;
    }
    let mut running = s.running;
    if s.spec_changed && running {
        out.push(Effect::Stop("instance spec changed"));
        running = false;
    }
    if !running && s.pending == Pending::Nothing && !s.degraded {
        out.push(Effect::Spawn);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Effect::*;
    use super::*;

    /// A running, settled instance on the leader.
    const BASE: Seen = Seen {
        deleting: false,
        has_finalizer: true,
        leader: true,
        paused: false,
        asleep: false,
        owned_elsewhere: false,
        spec_changed: false,
        restart_requested: false,
        running: true,
        pending: Pending::Nothing,
        degraded: false,
    };

    #[test]
    fn each_case_gives_its_effects() {
        let cases: &[(&str, Seen, &[Effect])] = &[
            ("settled: nothing", BASE, &[]),
            (
                "new: spawned, finalizer added on the leader",
                Seen {
                    has_finalizer: false,
                    running: false,
                    spec_changed: true,
                    ..BASE
                },
                &[AddFinalizer, Spawn],
            ),
            (
                "a follower adds no finalizer",
                Seen {
                    has_finalizer: false,
                    leader: false,
                    running: false,
                    ..BASE
                },
                &[Spawn],
            ),
            (
                "spec changed: a fresh actor",
                Seen {
                    spec_changed: true,
                    ..BASE
                },
                &[Stop("instance spec changed"), Spawn],
            ),
            (
                "spec changed while a respawn waits: stopped, the respawn starts it",
                Seen {
                    spec_changed: true,
                    pending: Pending::Respawn,
                    ..BASE
                },
                &[Stop("instance spec changed")],
            ),
            (
                "degraded: not started until its retry",
                Seen {
                    running: false,
                    degraded: true,
                    ..BASE
                },
                &[],
            ),
            (
                "paused",
                Seen {
                    paused: true,
                    ..BASE
                },
                &[Stop("instance is paused")],
            ),
            (
                "a restart of a paused instance waits for it to resume",
                Seen {
                    paused: true,
                    restart_requested: true,
                    ..BASE
                },
                &[Stop("instance is paused")],
            ),
            (
                "restart requested",
                Seen {
                    restart_requested: true,
                    ..BASE
                },
                &[Restart],
            ),
            (
                "asleep",
                Seen {
                    asleep: true,
                    ..BASE
                },
                &[Stop("instance is hibernating")],
            ),
            (
                "owned by another replica",
                Seen {
                    owned_elsewhere: true,
                    leader: false,
                    ..BASE
                },
                &[Stop("owned by another replica")],
            ),
            (
                "deleted on the leader: stopped and cleaned up once",
                Seen {
                    deleting: true,
                    ..BASE
                },
                &[Stop("instance is being deleted"), Cleanup],
            ),
            (
                "deleted, its cleanup under way",
                Seen {
                    deleting: true,
                    pending: Pending::Cleanup,
                    ..BASE
                },
                &[Stop("instance is being deleted")],
            ),
            (
                "deleted, seen by a follower",
                Seen {
                    deleting: true,
                    leader: false,
                    ..BASE
                },
                &[Stop("instance is being deleted")],
            ),
            (
                "deleted without Kairship's finalizer: nothing of Kairship's to clean",
                Seen {
                    deleting: true,
                    has_finalizer: false,
                    ..BASE
                },
                &[Stop("instance is being deleted")],
            ),
        ];
        for (what, seen, want) in cases {
            assert_eq!(decide(seen), *want, "{what}");
        }
    }
}
