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
        Self::of(super::TABLE.iter().filter(|e| !off.contains(e.name)))
    }

    fn of<'a>(entries: impl Iterator<Item = &'a super::table::Entry>) -> Self {
        let (mut slots, mut times) = (Vec::new(), Vec::new());
        for entry in entries {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use parking_lot::Mutex;

    use super::*;
    use crate::controllers::testing::{context, instance, mock, Look};
    use crate::controllers::{Controller, Report, Work};

    /// What the probe controller does at its next look, and how many looks it had.
    static LOOKS: AtomicUsize = AtomicUsize::new(0);
    static SCRIPT: Mutex<Script> = Mutex::new(Script {
        work: None,
        then: Action { after: None },
        requeued: Vec::new(),
    });

    struct Script {
        /// Work to start (its outcome), or none.
        work: Option<Result<(), String>>,
        then: Action,
        /// `Scope::requeued` at each look.
        requeued: Vec<bool>,
    }

    #[derive(Default)]
    struct Probe;

    impl Controller for Probe {
        const NAME: &'static str = "probe";
        type Found = ();

        fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, _: &mut Report) -> Next<()> {
            LOOKS.fetch_add(1, Ordering::SeqCst);
            let mut script = SCRIPT.lock();
            script.requeued.push(scope.requeued());
            match script.work.clone() {
                Some(outcome) => {
                    let work: Work<()> =
                        Box::pin(async move { outcome.map_err(ControllerError::Failed) });
                    Next::Start(work)
                }
                None => Next::Idle,
            }
        }

        fn record(&mut self, _: (), report: &mut Report) -> Action {
            report.say("Probed", Some(true), "Done", "");
            SCRIPT.lock().then
        }
    }

    /// Long enough that the tick right after a look never comes after it.
    const REQUEUE: Duration = Duration::from_secs(1);
    const PAST_REQUEUE: Duration = Duration::from_millis(1100);

    const PROBE: crate::controllers::table::Entry =
        crate::controllers::table::entry::<Probe>("a test controller");

    /// One tick; the work it started, run to its end and taken in.
    async fn tick(runner: &mut Runner, look: &Look, observed: &mut Observed) -> Option<String> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        runner.tick(look.scope(), true, observed, move |d| drop(tx.send(d)));
        match rx.recv().await {
            Some(done) => runner.finished(done, observed),
            None => None,
        }
    }

    fn script(work: Option<Result<(), String>>, then: Action) {
        let mut s = SCRIPT.lock();
        (s.work, s.then) = (work, then);
    }

    #[tokio::test]
    async fn looks_again_when_the_action_says_or_what_it_watches_changes() {
        let (host, _) = mock(|_| None);
        let look = Look::new(instance("team-a"), context(host, Default::default()));
        let mut runner = Runner::of([PROBE].iter());
        let mut observed = Observed::default();
        let looks = || LOOKS.load(Ordering::SeqCst);

        script(Some(Ok(())), Action::requeue(REQUEUE));
        assert_eq!(tick(&mut runner, &look, &mut observed).await, None);
        assert_eq!(looks(), 1, "a first look at once");
        assert_eq!(
            observed
                .reports
                .get("probe")
                .and_then(|r| r.said("Probed"))
                .map(|c| c.status),
            Some(Some(true)),
            "what it recorded is its report"
        );
        tick(&mut runner, &look, &mut observed).await;
        assert_eq!(looks(), 1, "not before its time, nothing changed");
        tokio::time::sleep(PAST_REQUEUE).await;
        tick(&mut runner, &look, &mut observed).await;
        assert_eq!(looks(), 2, "requeued");

        script(Some(Ok(())), Action::await_change());
        tokio::time::sleep(PAST_REQUEUE).await;
        tick(&mut runner, &look, &mut observed).await;
        assert_eq!(looks(), 3, "its last action was the requeue");
        tokio::time::sleep(PAST_REQUEUE).await;
        tick(&mut runner, &look, &mut observed).await;
        assert_eq!(looks(), 3, "now it awaits a change");
        observed.endpoint = Some("https://moved:5443".into());
        tick(&mut runner, &look, &mut observed).await;
        assert_eq!(looks(), 4, "a watched field changed");

        // Failures: retried with backoff, a change does not cut the wait short.
        script(Some(Err("the host said no".into())), Action::await_change());
        observed.endpoint = Some("https://again:5443".into());
        let error = tick(&mut runner, &look, &mut observed).await;
        assert_eq!(error.as_deref(), Some("controller probe: the host said no"));
        assert_eq!(looks(), 5);
        observed.endpoint = Some("https://third:5443".into());
        tick(&mut runner, &look, &mut observed).await;
        assert_eq!(looks(), 5, "inside its backoff");
        let view = runner.view();
        assert_eq!(
            (view[0].failures, view[0].last_error.as_deref()),
            (1, Some("the host said no"))
        );
        let requeued = SCRIPT.lock().requeued.clone();
        assert_eq!(
            requeued,
            [false, true, true, false, false],
            "why each look came"
        );
    }
}
