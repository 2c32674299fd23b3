//! Runs one instance's controllers: at most one piece of work in flight each, their error
//! policy, and aborting their work when the actor stops or leadership is lost.

use std::any::Any;
use std::hash::Hasher;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tracing::Instrument;

use super::erased::Erased;
use super::{Action, ControllerError, Next, Observed, Scope};

/// When one controller last finished, for the others to read ([`Scope::succeeded_at`]).
#[derive(Debug)]
pub(crate) struct Times {
    pub name: &'static str,
    pub ok: Option<Instant>,
    pub finished: Option<Instant>,
}

struct Slot {
    make: fn() -> Box<dyn Erased>,
    controller: Box<dyn Erased>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Bumped whenever work is abandoned, so its late report is ignored.
    epoch: u64,
    failures: u32,
    retry_at: Option<Instant>,
    /// Why its work last failed, while it keeps failing.
    last_error: Option<String>,
    /// It ran at the last tick (a leader-only controller on a follower does not).
    active: bool,
    /// When it looks again, besides on a change.
    due: Due,
    /// What it watched when its last action was taken (`None`: no action yet).
    key: Option<u64>,
    /// What it watched when its work in flight started.
    started_key: u64,
}

/// When a controller looks at its instance again, besides when what it watches changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// No action yet: at every tick.
    EveryTick,
    At(Instant),
    OnChange,
}

impl Due {
    fn of(action: Action, now: Instant) -> Self {
        action.due_at(now).map_or(Due::OnChange, Due::At)
    }
}

impl Slot {
    fn in_flight(&self) -> bool {
        self.task.is_some()
    }

    /// Forgets everything: work in flight, failures, and the controller's own memory.
    fn reset(&mut self, times: &mut Times) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        self.epoch += 1;
        self.failures = 0;
        self.retry_at = None;
        self.last_error = None;
        self.controller = (self.make)();
        self.due = Due::EveryTick;
        self.key = None;
        times.ok = None;
        times.finished = None;
    }
}

/// How one piece of work ended, reported to the instance actor.
pub struct Done {
    index: usize,
    epoch: u64,
    outcome: Result<Box<dyn Any + Send>, ControllerError>,
}

/// One instance's controllers, in the table's order.
pub struct Runner {
    slots: Vec<Slot>,
    times: Vec<Times>,
}

impl Runner {
    /// The table's controllers but those in `off`.
    pub fn new(off: &std::collections::BTreeSet<String>) -> Self {
        let (mut slots, mut times) = (Vec::new(), Vec::new());
        for entry in super::TABLE.iter().filter(|e| !off.contains(e.name)) {
            slots.push(Slot {
                make: entry.make,
                controller: (entry.make)(),
                task: None,
                epoch: 0,
                failures: 0,
                retry_at: None,
                last_error: None,
                active: false,
                due: Due::EveryTick,
                key: None,
                started_key: 0,
            });
            times.push(Times {
                name: entry.name,
                ok: None,
                finished: None,
            });
        }
        Self { slots, times }
    }

    /// Gives every controller that may run (`leader`: this replica leads), has nothing in
    /// flight and is due or sees a change its look at the instance; work they start
    /// reports through `report`.
    pub fn tick<R>(&mut self, scope: Scope<'_>, leader: bool, observed: &mut Observed, report: R)
    where
        R: Fn(Done) + Clone + Send + 'static,
    {
        let now = Instant::now();
        let base = super::watched_key(&scope, observed);
        let Runner { slots, times } = self;
        for (index, slot) in slots.iter_mut().enumerate() {
            let name = slot.controller.name();
            if slot.controller.leader_only() && !leader {
                if slot.active {
                    slot.reset(&mut times[index]);
                    observed.reports.put(name, Default::default());
                    slot.active = false;
                }
                continue;
            }
            slot.active = true;
            if slot.in_flight() || slot.retry_at.is_some_and(|t| now < t) {
                continue;
            }
            let mut scope = Scope {
                runs: times,
                requeued: false,
                ..scope
            };
            let key = {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                h.write_u64(base);
                slot.controller.watches(&scope, observed, &mut h);
                h.finish()
            };
            scope.requeued = matches!(slot.due, Due::At(t) if now >= t);
            let changed = slot.key != Some(key);
            if !(scope.requeued || changed || slot.due == Due::EveryTick) {
                continue;
            }
            let mut said = observed.reports.take(name);
            let next = slot.controller.reconcile(&scope, observed, &mut said);
            observed.reports.put(name, said);
            let work = match next {
                Next::Start(work) => work,
                Next::Idle => {
                    slot.key = Some(key);
                    continue;
                }
                Next::Wait(action) => {
                    (slot.due, slot.key) = (Due::of(action, now), Some(key));
                    continue;
                }
            };
            slot.started_key = key;
            let (epoch, report) = (slot.epoch, report.clone());
            let span = tracing::error_span!("controller", controller = name);
            let task = async move {
                let outcome = match std::panic::AssertUnwindSafe(work).catch_unwind().await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(ControllerError::Panicked),
                };
                report(Done {
                    index,
                    epoch,
                    outcome,
                });
            };
            slot.task = Some(tokio::spawn(task.instrument(span)));
        }
    }

    /// Takes in how a piece of work ended; an error comes back, named after its
    /// controller, for the actor's last error.
    pub fn finished(&mut self, done: Done, observed: &mut Observed) -> Option<String> {
        let (slot, times) = (
            self.slots.get_mut(done.index)?,
            self.times.get_mut(done.index)?,
        );
        if slot.epoch != done.epoch {
            return None;
        }
        slot.task = None;
        let now = Instant::now();
        times.finished = Some(now);
        match done.outcome {
            Ok(found) => {
                let name = slot.controller.name();
                let mut said = observed.reports.take(name);
                let action = slot.controller.record(found, &mut said);
                observed.reports.put(name, said);
                let Some(action) = action else {
                    // A bug, not the instance's doing: said once, then looked at again.
                    slot.key = None;
                    return Some(format!("controller {name}: its work found another type"));
                };
                slot.failures = 0;
                slot.retry_at = None;
                slot.last_error = None;
                times.ok = Some(now);
                (slot.due, slot.key) = (Due::of(action, now), Some(slot.started_key));
                None
            }
            Err(e) => {
                slot.failures = slot.failures.saturating_add(1);
                let wait = crate::host::backoff::backoff_step(
                    Duration::from_secs(1),
                    slot.controller.retry_max(),
                    slot.failures as usize,
                );
                slot.retry_at = Some(now + wait);
                (slot.due, slot.key) = (Due::At(now + wait), Some(slot.started_key));
                let name = slot.controller.name();
                tracing::warn!(controller = name, error = %e, retry_in = ?wait, "controller failed");
                let e = e.to_string();
                slot.last_error = Some(e.clone());
                Some(format!("controller {name}: {e}"))
            }
        }
    }

    /// Aborts all work in flight (the actor stops).
    pub fn abort(&mut self) {
        for slot in &mut self.slots {
            if let Some(t) = slot.task.take() {
                t.abort();
            }
        }
    }

    /// The controllers' names and how each stands, for the actor's view.
    pub fn view(&self) -> Vec<ControllerView> {
        self.slots
            .iter()
            .zip(&self.times)
            .map(|(s, t)| ControllerView {
                name: t.name,
                active: s.active,
                in_flight: s.in_flight(),
                failures: s.failures,
                succeeded_ago: t.ok.map(|t| t.elapsed()),
                last_error: s.last_error.clone(),
            })
            .collect()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.abort();
    }
}

/// How one controller of an instance stands.
#[derive(Debug, Clone)]
pub struct ControllerView {
    pub name: &'static str,
    /// It runs on this replica now (a leader-only controller runs on the leader).
    pub active: bool,
    pub in_flight: bool,
    /// Consecutive failures (retried with backoff).
    pub failures: u32,
    pub succeeded_ago: Option<Duration>,
    pub last_error: Option<String>,
}
