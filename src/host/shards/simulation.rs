//! A deterministic simulation of placement (issue 57): replicas that join, leave, crash
//! and lose the host for a while, each running the real pieces (`members::Liveness` on
//! its Lease listings, `ring::owner`, `handoff::step`, `machine::decide`) against a model
//! host, on a fake clock, with watch events, record writes and their answers delayed,
//! reordered between replicas (never within one replica's watch, as Kubernetes
//! guarantees) and refused. What the manager does with each effect is modelled as it
//! does it (`actors::manager::placement`): a write goes out only once the actor it
//! stopped has ended, and a record write succeeds only while the record is still the one
//! it was decided on.
//!
//! Checked after every event of thousands of seeded runs: no instance has a live actor on
//! two replicas. Checked at the end of each run, once nothing has changed for a while:
//! every instance runs on exactly one replica, the ring's owner among the live ones, and
//! is recorded for it; in runs whose writes are never refused, that held within a Lease
//! plus a listing period (and the time the writes take) after the last change.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use super::handoff;
use super::machine::{self, Effect, Event, Placement, Record};
use super::members::{Liveness, Seen};
use super::ring;

const LEASE: u64 = 15_000;
const RENEW_DEADLINE: u64 = 10_000;
const RETRY: u64 = 2_000;
/// The manager's first wait after a failed write (its tick).
const WRITE_RETRY: u64 = 2_000;
/// A write to a host that does not answer gives up after this (host_call_timeout).
const HOST_TIMEOUT: u64 = 10_000;

/// A small deterministic generator (splitmix64), so every seed replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone)]
enum Ev {
    Renew(usize),
    /// The periodic listing of the shard Leases.
    List(usize),
    /// A listing at once (a Lease's holder changed), outside the period.
    ListNow(usize),
    /// A watch event of the Instance: its record and version.
    Deliver(usize, String, Option<String>, u64),
    /// A record write reaches the host: (replica, instance, to, the record it was decided on).
    Write(usize, String, Option<String>, Option<String>),
    /// The write's answer reaches the replica.
    Written(usize, String, bool),
    /// An actor stopped with `stop_and_wait`: its write goes out now.
    StoppedThenWrite(usize, String, Option<String>, Option<String>),
    /// An actor stopped without waiting has ended.
    Stopped(usize, String),
    Decide(usize, String),
    /// A status write: the version moves, the record does not.
    Bump(String),
    Join,
    Leave,
    Crash,
    Partition,
    Heal,
    Exit(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Actor {
    Running,
    Stopping,
}

struct Replica {
    name: String,
    /// The process runs (a crashed or exited one is gone with its actors).
    alive: bool,
    /// Cut off from the host until this time.
    cut_until: u64,
    released: bool,
    liveness: Liveness,
    listed_live: BTreeSet<String>,
    /// Replicas whose Lease changed within a lease duration, as of the last listing.
    holding: BTreeSet<String>,
    renewed_at: Option<u64>,
    holds_lease: bool,
    listed_since_held: bool,
    cache: BTreeMap<String, (Option<String>, u64)>,
    placement: BTreeMap<String, Placement>,
    actors: BTreeMap<String, Actor>,
    /// When this replica's watch has delivered up to: events are delivered in order.
    watch_at: u64,
}

impl Replica {
    /// As `Shards::deciding`: the listing, this replica in it only while it holds its
    /// Lease and has listed since it gained it.
    fn live(&self) -> BTreeSet<String> {
        let mut live = self.listed_live.clone();
        if !self.holds_lease || !self.listed_since_held {
            live.remove(&self.name);
        }
        live
    }

    fn cut(&self, now: u64) -> bool {
        now < self.cut_until
    }
}

struct World {
    now: u64,
    seq: u64,
    queue: BTreeMap<(u64, u64), Ev>,
    rng: Rng,
    base: Instant,
    /// The host: each instance's record and version; each replica's Lease renew time
    /// (`None` once released).
    records: BTreeMap<String, (Option<String>, u64)>,
    leases: BTreeMap<String, Option<u64>>,
    replicas: Vec<Replica>,
    refuse_percent: u64,
    /// When the set of replicas (or their reach of the host) last changed.
    last_change: u64,
    /// When the fleet was last seen settled: each instance on its ring owner, recorded so.
    settled_at: Option<u64>,
    events: usize,
    /// Print every event (`KAIRSHIP_SIM_TRACE=<seed>`), to follow a failing seed.
    trace: bool,
}

impl World {
    fn new(seed: u64, instances: usize, refuse_percent: u64) -> Self {
        let records = (0..instances)
            .map(|i| (format!("i{i}"), (None, 1)))
            .collect();
        Self {
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            rng: Rng(seed),
            base: Instant::now(),
            records,
            leases: BTreeMap::new(),
            replicas: Vec::new(),
            refuse_percent,
            last_change: 0,
            settled_at: None,
            events: 0,
            trace: std::env::var("KAIRSHIP_SIM_TRACE").is_ok_and(|v| v == seed.to_string()),
        }
    }

    fn at(&mut self, delay: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((self.now + delay, self.seq), ev);
    }

    fn latency(&mut self) -> u64 {
        1 + self.rng.below(300)
    }

    fn join(&mut self) {
        let r = self.replicas.len();
        self.replicas.push(Replica {
            name: format!("r{r}"),
            alive: true,
            cut_until: 0,
            released: false,
            liveness: Liveness::new("shard", Duration::from_millis(LEASE)),
            listed_live: BTreeSet::new(),
            holding: BTreeSet::new(),
            renewed_at: None,
            holds_lease: false,
            listed_since_held: false,
            cache: BTreeMap::new(),
            placement: BTreeMap::new(),
            actors: BTreeMap::new(),
            watch_at: self.now,
        });
        // Its watch starts with a listing of every Instance.
        let all: Vec<(String, (Option<String>, u64))> = self
            .records
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (i, (owner, version)) in all {
            self.deliver(r, i, owner, version);
        }
        self.at(0, Ev::Renew(r));
        let first_list = self.rng.below(RETRY);
        self.at(first_list, Ev::List(r));
    }

    /// Queues a watch event for replica `r`, after those before it.
    fn deliver(&mut self, r: usize, i: String, owner: Option<String>, version: u64) {
        let lag = self.latency();
        let when = (self.now + lag).max(self.replicas[r].watch_at);
        self.replicas[r].watch_at = when;
        self.seq += 1;
        self.queue
            .insert((when, self.seq), Ev::Deliver(r, i, owner, version));
    }

    fn host_changed(&mut self, i: &str) {
        let (owner, version) = self.records[i].clone();
        for r in 0..self.replicas.len() {
            if self.replicas[r].alive {
                self.deliver(r, i.to_string(), owner.clone(), version);
            }
        }
    }

    /// Every replica lists the Leases soon (a holder changed, as the Lease watch says).
    fn lease_holder_changed(&mut self) {
        for r in 0..self.replicas.len() {
            let lag = self.latency();
            self.at(lag, Ev::ListNow(r));
        }
    }

    /// Replica `r` decides for instance `i` on its cache, as the manager's `apply` does.
    fn decide(&mut self, r: usize, i: &str) {
        let rep = &self.replicas[r];
        if !rep.alive {
            return;
        }
        let Some((owner, version)) = rep.cache.get(i).cloned() else {
            return;
        };
        let live = rep.live();
        let members: Vec<&String> = live.iter().collect();
        let step = handoff::step(
            &rep.name,
            ring::owner(i, &members),
            owner.as_deref(),
            &live,
            &rep.holding,
        );
        let state = rep.placement.get(i).cloned().unwrap_or_default();
        let v = version.to_string();
        let seen = Event::Seen {
            step,
            version: Some(&v),
        };
        let (next, effects) = machine::decide(&state, &seen, Duration::from_millis(WRITE_RETRY));
        self.replicas[r].placement.insert(i.to_string(), next);
        for e in effects {
            self.effect(r, i, e, owner.clone());
        }
    }

    fn effect(&mut self, r: usize, i: &str, e: Effect, seen_owner: Option<String>) {
        match e {
            Effect::Proceed => {
                self.replicas[r]
                    .actors
                    .entry(i.to_string())
                    .or_insert(Actor::Running);
            }
            Effect::Stop => {
                if let Some(a) = self.replicas[r].actors.get_mut(i) {
                    if *a == Actor::Running {
                        *a = Actor::Stopping;
                        let d = self.rng.below(50);
                        self.at(d, Ev::Stopped(r, i.to_string()));
                    }
                }
            }
            Effect::Write(record) => {
                let to = match record {
                    Record::Me => Some(self.replicas[r].name.clone()),
                    Record::Nobody => None,
                };
                // The actor is stopped and waited for before the write goes out.
                let stop = match self.replicas[r].actors.get_mut(i) {
                    Some(a) => {
                        *a = Actor::Stopping;
                        self.rng.below(200)
                    }
                    None => 0,
                };
                self.at(stop, Ev::StoppedThenWrite(r, i.to_string(), to, seen_owner));
            }
            Effect::DecideAgain => self.at(0, Ev::Decide(r, i.to_string())),
            Effect::DecideAgainAfter(d) => {
                self.at(d.as_millis() as u64, Ev::Decide(r, i.to_string()))
            }
        }
    }

    fn step(&mut self, ev: Ev) {
        self.events += 1;
        let now = self.now;
        match ev {
            Ev::Renew(r) => {
                let rep = &self.replicas[r];
                if !rep.alive || rep.released {
                    return;
                }
                let was = rep.holds_lease;
                if rep.cut(now) {
                    let lost = rep
                        .renewed_at
                        .is_none_or(|t| now.saturating_sub(t) >= RENEW_DEADLINE);
                    self.replicas[r].holds_lease = !lost;
                } else {
                    let name = rep.name.clone();
                    let first = !self.leases.contains_key(&name);
                    self.leases.insert(name, Some(now));
                    self.replicas[r].renewed_at = Some(now);
                    self.replicas[r].holds_lease = true;
                    if first {
                        self.lease_holder_changed();
                    }
                }
                if was != self.replicas[r].holds_lease {
                    // As the shard loop does: listed again at once, and nothing owned here
                    // until then.
                    self.replicas[r].listed_since_held = false;
                    self.at(0, Ev::ListNow(r));
                    self.decide_all(r);
                }
                self.at(RETRY, Ev::Renew(r));
            }
            Ev::List(r) | Ev::ListNow(r) => {
                let periodic = matches!(ev, Ev::List(_));
                let rep = &self.replicas[r];
                if !rep.alive {
                    return;
                }
                if !rep.cut(now) {
                    let listed: Vec<Seen> = self
                        .leases
                        .iter()
                        .map(|(name, renew)| Seen {
                            name: format!("shard-{name}"),
                            holder: renew.map(|_| name.clone()),
                            renew_time: renew.map(|t| t.to_string()),
                        })
                        .collect();
                    let at = self.base + Duration::from_millis(now);
                    let live = self.replicas[r].liveness.observe(at, &listed);
                    let held = self.replicas[r].holds_lease;
                    let gained = held && !self.replicas[r].listed_since_held;
                    self.replicas[r].listed_since_held = held;
                    let holding = self.replicas[r].liveness.recent(at);
                    let lapsed = holding != self.replicas[r].holding;
                    self.replicas[r].holding = holding;
                    if live != self.replicas[r].listed_live || lapsed || gained {
                        self.replicas[r].listed_live = live;
                        self.decide_all(r);
                    }
                }
                if periodic {
                    self.at(RETRY, Ev::List(r));
                }
            }
            Ev::Deliver(r, i, owner, version) => {
                let rep = &mut self.replicas[r];
                if !rep.alive {
                    return;
                }
                if rep.cut(now) {
                    // The watch resumes once the host is back, in order.
                    let until = rep.cut_until;
                    rep.watch_at = rep.watch_at.max(until);
                    self.seq += 1;
                    self.queue
                        .insert((until + 1, self.seq), Ev::Deliver(r, i, owner, version));
                    return;
                }
                let newer = rep.cache.get(&i).is_none_or(|(_, v)| *v < version);
                if newer {
                    rep.cache.insert(i.clone(), (owner, version));
                    self.decide(r, &i);
                }
            }
            Ev::StoppedThenWrite(r, i, to, seen) => {
                if !self.replicas[r].alive {
                    return;
                }
                self.replicas[r].actors.remove(&i);
                if self.replicas[r].cut(now) {
                    self.at(HOST_TIMEOUT, Ev::Written(r, i, false));
                    return;
                }
                let lag = self.latency();
                self.at(lag, Ev::Write(r, i, to, seen));
            }
            Ev::Write(r, i, to, seen) => {
                let refused = self.rng.chance(self.refuse_percent);
                let current = self.records[&i].0.clone();
                let ok = !refused && current == seen;
                if ok {
                    let version = self.records[&i].1 + 1;
                    self.records.insert(i.clone(), (to, version));
                    self.host_changed(&i);
                }
                let lag = self.latency();
                self.at(lag, Ev::Written(r, i, ok));
            }
            Ev::Written(r, i, ok) => {
                let rep = &self.replicas[r];
                if !rep.alive {
                    return;
                }
                let Some(state) = rep.placement.get(&i).cloned() else {
                    return;
                };
                let latest = rep.cache.get(&i).map(|(_, v)| v.to_string());
                let (next, effects) = machine::decide(
                    &state,
                    &Event::Written {
                        ok,
                        latest: latest.as_deref(),
                    },
                    Duration::from_millis(WRITE_RETRY),
                );
                self.replicas[r].placement.insert(i.clone(), next);
                for e in effects {
                    self.effect(r, &i, e, None);
                }
            }
            Ev::Stopped(r, i) => {
                if self.replicas[r].actors.get(&i) == Some(&Actor::Stopping) {
                    self.replicas[r].actors.remove(&i);
                }
            }
            Ev::Decide(r, i) => self.decide(r, &i),
            Ev::Bump(i) => {
                if let Some(e) = self.records.get_mut(&i) {
                    e.1 += 1;
                }
                self.host_changed(&i);
            }
            Ev::Join => {
                self.last_change = now;
                self.join();
            }
            Ev::Leave => {
                // A graceful stop: the Lease released, instances handed over, then gone.
                if let Some(r) = self.pick_alive() {
                    self.last_change = now;
                    let name = self.replicas[r].name.clone();
                    self.replicas[r].released = true;
                    self.replicas[r].holds_lease = false;
                    self.leases.insert(name, None);
                    self.lease_holder_changed();
                    self.decide_all(r);
                    self.at(15_000, Ev::Exit(r));
                }
            }
            Ev::Crash => {
                if let Some(r) = self.pick_alive() {
                    self.last_change = now;
                    self.exit(r);
                }
            }
            Ev::Exit(r) => self.exit(r),
            Ev::Partition => {
                if let Some(r) = self.pick_alive() {
                    self.last_change = now;
                    let d = 3_000 + self.rng.below(30_000);
                    self.replicas[r].cut_until = now + d;
                    self.at(d, Ev::Heal);
                }
            }
            Ev::Heal => self.last_change = now,
        }
    }

    fn exit(&mut self, r: usize) {
        let rep = &mut self.replicas[r];
        rep.alive = false;
        rep.actors.clear();
    }

    fn decide_all(&mut self, r: usize) {
        let names: Vec<String> = self.replicas[r].cache.keys().cloned().collect();
        for i in names {
            self.decide(r, &i);
        }
    }

    fn pick_alive(&mut self) -> Option<usize> {
        let alive: Vec<usize> = (0..self.replicas.len())
            .filter(|r| self.replicas[*r].alive && !self.replicas[*r].released)
            .collect();
        // Keep at least one replica.
        if alive.len() < 2 {
            return None;
        }
        let k = self.rng.below(alive.len() as u64) as usize;
        Some(alive[k])
    }

    /// No instance with a live actor on two replicas.
    fn check_safety(&self) -> Result<(), String> {
        for i in self.records.keys() {
            let on: Vec<&str> = self
                .replicas
                .iter()
                .filter(|r| r.alive && r.actors.contains_key(i))
                .map(|r| r.name.as_str())
                .collect();
            if on.len() > 1 {
                let state: Vec<String> = self
                    .replicas
                    .iter()
                    .filter(|r| r.alive && r.actors.contains_key(i))
                    .map(|r| {
                        format!(
                            "{}: cut until {}, holds its Lease {}, live {:?}, holding {:?}, sees {:?}, {:?}, actor {:?}",
                            r.name,
                            r.cut_until,
                            r.holds_lease,
                            r.live(),
                            r.holding,
                            r.cache.get(i),
                            r.placement.get(i),
                            r.actors.get(i)
                        )
                    })
                    .collect();
                return Err(format!(
                    "{i} runs on {on:?} at {} ms: {}",
                    self.now,
                    state.join("; ")
                ));
            }
        }
        Ok(())
    }

    /// Every instance running on exactly one replica, the ring's owner among the live
    /// ones, and recorded for it; `None` when it is not so, naming the first that is not.
    fn settled(&self) -> Result<(), String> {
        let live: Vec<&String> = self
            .replicas
            .iter()
            .filter(|r| r.alive && !r.released && !r.cut(self.now))
            .map(|r| &r.name)
            .collect();
        for (i, (owner, _)) in &self.records {
            let want = ring::owner(i, &live);
            let on: Vec<&str> = self
                .replicas
                .iter()
                .filter(|r| r.alive && r.actors.get(i) == Some(&Actor::Running))
                .map(|r| r.name.as_str())
                .collect();
            if want.map(|w| vec![w]) != Some(on.clone()) || owner.as_deref() != want {
                return Err(format!(
                    "{i}: ring owner {want:?}, recorded {owner:?}, running on {on:?} at {} ms",
                    self.now
                ));
            }
        }
        Ok(())
    }

    /// Runs until `until` ms, checking safety after every event.
    fn run(&mut self, until: u64) -> Result<(), String> {
        while let Some((&(t, seq), _)) = self.queue.iter().next() {
            if t > until {
                break;
            }
            let ev = self.queue.remove(&(t, seq)).ok_or("queue")?;
            self.now = t;
            if self.trace {
                println!("{t:>7} {ev:?}");
            }
            self.step(ev);
            self.check_safety()?;
            match self.settled() {
                Ok(()) => {
                    self.settled_at.get_or_insert(t);
                }
                Err(_) => self.settled_at = None,
            }
        }
        self.now = until;
        Ok(())
    }
}

/// One seeded run: 3 replicas, then `faults` faults a few seconds apart, then quiet.
fn run(seed: u64, refuse_percent: u64) -> Result<World, String> {
    let mut w = World::new(seed, 12, refuse_percent);
    for _ in 0..3 {
        w.at(0, Ev::Join);
    }
    let mut t = 5_000;
    let faults = 1 + w.rng.below(6);
    for _ in 0..faults {
        t += w.rng.below(20_000);
        let ev = match w.rng.below(4) {
            0 => Ev::Join,
            1 => Ev::Leave,
            2 => Ev::Crash,
            _ => Ev::Partition,
        };
        w.seq += 1;
        w.queue.insert((t, w.seq), ev);
    }
    // Status writes all along.
    for _ in 0..40 {
        let i = format!("i{}", w.rng.below(12));
        let when = w.rng.below(t + 60_000);
        w.seq += 1;
        w.queue.insert((when, w.seq), Ev::Bump(i));
    }
    w.run(t + 120_000)
        .map_err(|e| format!("seed {seed}: {e}"))?;
    w.settled()
        .map_err(|e| format!("seed {seed}: never settled: {e}"))?;
    Ok(w)
}

#[test]
fn placement_never_runs_an_instance_twice_and_always_settles() {
    // A partition can last 33 s: a run ends 120 s after its last fault.
    let mut slowest = 0;
    let mut events = 0;
    for seed in 0..1000 {
        let w = run(seed, 0).unwrap_or_else(|e| panic!("{e}"));
        events += w.events;
        let settled = w.settled_at.expect("settled");
        // Within a Lease, a listing period and the writes' time after the last change (a
        // healed partition counts from its healing).
        let took = settled.saturating_sub(w.last_change);
        slowest = slowest.max(took);
        assert!(
            took <= LEASE + 2 * RETRY + 2_000,
            "seed {seed}: settled {took} ms after the last change"
        );
    }
    for seed in 0..300 {
        // Writes refused one time in five: slower, but it still settles.
        let w = run(10_000 + seed, 20).unwrap_or_else(|e| panic!("{e}"));
        events += w.events;
    }
    println!("1,300 runs, {events} events; slowest settling without refusals {slowest} ms");
}
