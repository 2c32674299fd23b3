//! Experiment files (`chaos/*.yaml`) and the profiles that time them.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One experiment: a fault against one victim (or the host, or the tree) while the
/// other instances carry steady load.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The instance the fault hits; none when the fault is not an instance's.
    #[serde(default)]
    pub victim: Option<String>,
    pub fault: Fault,
    #[serde(default)]
    pub expect: Expect,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// A simulator fault on the victim's karmada-apiserver.
    Instance {
        mode: SimMode,
        #[serde(default)]
        latency_ms: Option<u64>,
        #[serde(default)]
        error_rate: Option<f64>,
        /// Set again at this period (compaction is a one-off event otherwise).
        #[serde(default)]
        repeat_ms: Option<u64>,
    },
    /// A simulator fault on the host API, where Instances live.
    Host {
        mode: SimMode,
        #[serde(default)]
        latency_ms: Option<u64>,
    },
    /// One of the victim's member clusters flips between Ready and NotReady.
    MemberFlap {
        cluster: String,
        #[serde(default = "default_repeat")]
        repeat_ms: u64,
    },
    /// The victim's instance actor is made to panic whenever it is alive.
    ActorPanic {
        #[serde(default = "default_repeat")]
        repeat_ms: u64,
    },
    /// The instance manager actor is made to crash.
    ManagerCrash {
        #[serde(default = "default_repeat")]
        repeat_ms: u64,
    },
    /// The victim gets `factor` times the normal request rate.
    Burst { factor: u32 },
    /// A hostile victim: an editor writes objects of `object_bytes` into it at
    /// `objects_per_second` (new ones and rewrites of old ones: endless watch events), it
    /// answers `latency_ms` late, its cache budget is `budget_bytes`, and a viewer opens
    /// `watchers` pass-through watches on it as fast as it is let.
    Hostile {
        #[serde(default = "default_object_bytes")]
        object_bytes: u64,
        #[serde(default = "default_objects_per_second")]
        objects_per_second: u32,
        #[serde(default = "default_watchers")]
        watchers: u32,
        #[serde(default)]
        latency_ms: Option<u64>,
        budget_bytes: u64,
    },
    /// The leading replica of two is killed or frozen (see `chaos::leader_failover`); it brings
    /// its own host and replicas, so it needs neither a victim nor the fleet.
    Leader { signal: LeaderSignal },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaderSignal {
    /// SIGKILL: the process is gone.
    Kill,
    /// SIGSTOP, then SIGCONT once the other replica leads: it must not write again.
    Stop,
}

fn default_object_bytes() -> u64 {
    512 * 1024
}

fn default_objects_per_second() -> u32 {
    20
}

fn default_watchers() -> u32 {
    64
}

fn default_repeat() -> u64 {
    1000
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SimMode {
    Down,
    Latency,
    Errors,
    DropWatches,
    Compact,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The phase the victim must be reported in while the fault stands (detection time).
    #[serde(default)]
    pub victim_phase: Option<String>,
}

impl Fault {
    /// Needs the tree in this process (not reachable through `--endpoints`).
    pub fn in_process(&self) -> bool {
        matches!(self, Fault::ActorPanic { .. } | Fault::ManagerCrash { .. })
    }

    pub fn needs_victim(&self) -> bool {
        !matches!(
            self,
            Fault::Host { .. } | Fault::ManagerCrash { .. } | Fault::Leader { .. }
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// Reads and checks one experiment file, naming the file and the field that is wrong.
pub fn load(path: &Path) -> Result<Experiment, SpecError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: p.clone(),
        source,
    })?;
    parse(&text).map_err(|message| SpecError::Invalid { path: p, message })
}

pub fn parse(text: &str) -> Result<Experiment, String> {
    let e: Experiment = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    if e.name.is_empty() {
        return Err("name must not be empty".into());
    }
    if e.fault.needs_victim() && e.victim.is_none() {
        return Err("victim is required for this fault".into());
    }
    match &e.fault {
        Fault::Instance {
            mode: SimMode::Latency,
            latency_ms: None,
            ..
        }
        | Fault::Host {
            mode: SimMode::Latency,
            latency_ms: None,
        } => return Err("fault.latency_ms is required with mode latency".into()),
        Fault::Instance {
            mode: SimMode::Errors,
            error_rate,
            ..
        } if !error_rate.is_some_and(|r| r > 0.0 && r <= 1.0) => {
            return Err("fault.error_rate must be in (0, 1] with mode errors".into())
        }
        Fault::Burst { factor } if *factor < 2 => {
            return Err("fault.factor must be at least 2".into())
        }
        _ => {}
    }
    if let Some(p) = &e.expect.victim_phase {
        if !["Unreachable", "Degraded", "Pending"].contains(&p.as_str()) {
            return Err(format!(
                "expect.victim_phase {p:?} is not one of Unreachable, Degraded, Pending"
            ));
        }
    }
    Ok(e)
}

/// How long each window lasts and how hard the load pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Seconds per experiment, for the test suite.
    Short,
    /// Tens of seconds per window, for people.
    Full,
}

pub struct Timing {
    pub baseline: Duration,
    pub fault: Duration,
    /// The longest wait for the victim to recover after the fault is cleared.
    pub recovery: Duration,
    /// Requests per second per instance and surface.
    pub rate: u32,
    /// Healthy p99 during the fault over baseline p99.
    pub p99_ratio: f64,
    /// p99 latencies under this are noise on a shared 2-core machine, not a regression.
    pub p99_floor_ms: f64,
    /// Whether a missed p99 goal fails the experiment (the full profile); the short
    /// profile, run by the test suite on shared machines, reports it only.
    pub enforce_p99: bool,
}

impl Profile {
    pub fn timing(self) -> Timing {
        match self {
            Profile::Short => Timing {
                baseline: Duration::from_secs(3),
                fault: Duration::from_secs(10),
                recovery: Duration::from_secs(12),
                rate: 5,
                p99_ratio: 3.0,
                p99_floor_ms: 50.0,
                enforce_p99: false,
            },
            Profile::Full => Timing {
                baseline: Duration::from_secs(15),
                fault: Duration::from_secs(20),
                recovery: Duration::from_secs(15),
                rate: 10,
                p99_ratio: 1.2,
                p99_floor_ms: 0.0,
                enforce_p99: true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_experiment_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("chaos/ exists") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                load(&path).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 10, "{n} experiments");
    }

    #[test]
    fn bad_files_name_the_field() {
        let e = parse("name: x\nfault: {kind: instance, mode: down}\n").expect_err("no victim");
        assert!(e.contains("victim"), "{e}");
        let e = parse("name: x\nvictim: a\nfault: {kind: instance, mode: latency}\n")
            .expect_err("no latency");
        assert!(e.contains("latency_ms"), "{e}");
        let e = parse("name: x\nvictim: a\nfault: {kind: sideways}\n").expect_err("kind");
        assert!(e.contains("sideways"), "{e}");
        let e = parse(
            "name: x\nvictim: a\nfault: {kind: burst, factor: 10}\nexpect: {victim_phase: Gone}\n",
        )
        .expect_err("phase");
        assert!(e.contains("victim_phase"), "{e}");
    }
}
