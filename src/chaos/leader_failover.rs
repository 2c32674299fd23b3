//! Leader failover, measured from outside as an SRE would: two `kairship run` replicas
//! (controller-manager role, each its own process, as in production) elect a leader
//! through a Lease on a simulated host of their own (`kairship sim`, a third process), so
//! the fleet the other experiments load is not disturbed. The leader is SIGKILLed, or
//! frozen with SIGSTOP and continued once the other replica has taken over. Sampled every
//! 200 ms: the Lease holder, and each replica's `leader_election_master_status` and
//! `kairship_instance_status_writes_total` from its /metrics.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tracing::info;

use super::report::{ExperimentReport, Goal, Point};
use super::spec::{Experiment, LeaderSignal, Profile};
use crate::bootstrap;

const NAMESPACE: &str = "kairship-system";
const LEASE: &str = "kairship-controller-manager";
const INSTANCES: usize = 2;
const SAMPLE: Duration = Duration::from_millis(200);
/// A scrape that takes longer than this counts as no answer (a stopped process).
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(500);

/// Lease timings: Kubernetes' defaults (15/10/2 s) in the full profile, shorter for CI.
struct Election {
    lease: u64,
    renew: u64,
    retry: u64,
}

impl Election {
    fn of(profile: Profile) -> Self {
        match profile {
            Profile::Short => Self {
                lease: 4,
                renew: 3,
                retry: 1,
            },
            Profile::Full => Self {
                lease: 15,
                renew: 10,
                retry: 2,
            },
        }
    }
}

/// A child process, killed when dropped so no experiment leaves one behind.
struct Proc {
    child: Child,
    /// Stopped with SIGSTOP: continued before it is killed, or the kill would wait.
    stopped: bool,
}

impl Proc {
    fn spawn(args: &[String], log: &Path) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new(exe)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("starting kairship {}: {e}", args.join(" ")))?;
        Ok(Self {
            child,
            stopped: false,
        })
    }

    fn signal(&mut self, signal: rustix::process::Signal) -> Result<(), String> {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(0))
            .ok_or("no such process")?;
        rustix::process::kill_process(pid, signal).map_err(|e| format!("signal {signal:?}: {e}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.stopped {
            let _ = self.signal(rustix::process::Signal::CONT);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Replica {
    identity: String,
    metrics: String,
    proc: Option<Proc>,
}

/// What one replica's /metrics said.
#[derive(Clone, Copy, Debug, Default)]
struct Scrape {
    leader: bool,
    writes: u64,
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn value(text: &str, metric: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(metric))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn scrape(url: &str) -> Option<Scrape> {
    let (code, body) = tokio::time::timeout(
        SCRAPE_TIMEOUT,
        kairship_wire::fault_client::call("GET", url, None),
    )
    .await
    .ok()?
    .ok()?;
    let text = body.as_str().filter(|_| code == 200)?;
    Some(Scrape {
        leader: value(text, "leader_election_master_status")? == 1.0,
        writes: value(text, "kairship_instance_status_writes_total")? as u64,
    })
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = tokio::time::timeout(SCRAPE_TIMEOUT, leases.get_opt(LEASE))
        .await
        .ok()?
        .ok()??;
    let spec = lease.spec?;
    // An expired lease leads no one.
    let renewed = spec.renew_time?.0;
    let duration = i64::from(spec.lease_duration_seconds?);
    let age = jiff::Timestamp::now().duration_since(renewed).as_secs();
    // The replica, not its process (`actors::leader::process_identity`).
    let holder = spec.holder_identity?;
    (age <= duration).then(|| crate::host::leader::replica_of(&holder).to_string())
}

/// One sample of the whole system.
#[derive(Clone, Debug)]
struct Sample {
    t_ms: u32,
    holder: Option<String>,
    replicas: [Option<Scrape>; 2],
}

/// Starts the host and the two replicas and waits until the instances are Running.
async fn start(
    dir: &Path,
    election: &Election,
) -> Result<(Proc, [Replica; 2], kube::Client), String> {
    let sim_dir = dir.join("sim");
    let sim = Proc::spawn(
        &[
            "sim".into(),
            "--state-dir".into(),
            sim_dir.display().to_string(),
            "--instances".into(),
            INSTANCES.to_string(),
            "--clusters".into(),
            "2".into(),
        ],
        &dir.join("sim.log"),
    )?;
    let ready = sim_dir.join("endpoints.json");
    let t = Instant::now();
    while !ready.exists() {
        if t.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "kairship sim did not start; see {}",
                dir.join("sim.log").display()
            ));
        }
        tokio::time::sleep(SAMPLE).await;
    }
    let host_kubeconfig = sim_dir.join("kubeconfigs/host.kubeconfig");
    let host = crate::host::client::from_kubeconfig(Some(&host_kubeconfig)).await?;
    let kube_err = |what: &'static str| move |e: kube::Error| format!("{what}: {e}");
    bootstrap::install_crds(&host)
        .await
        .map_err(kube_err("installing CRDs"))?;
    bootstrap::ensure_namespace(&host, NAMESPACE)
        .await
        .map_err(kube_err("creating the namespace"))?;
    for i in 1..=INSTANCES {
        let name = format!("karmada-{i}");
        let path = sim_dir.join(format!("kubeconfigs/{name}.kubeconfig"));
        let config = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        bootstrap::attach_external(&host, NAMESPACE, &name, config)
            .await
            .map_err(kube_err("attaching an instance"))?;
    }
    let replica = |name: &str| -> Result<Replica, String> {
        let port = free_port()?;
        let identity = format!("chaos-replica-{name}");
        let args: Vec<String> = [
            "run",
            "--role",
            "controller-manager",
            "--kubeconfig",
            &host_kubeconfig.display().to_string(),
            "--identity",
            &identity,
            "--leader-elect-namespace",
            NAMESPACE,
            "--leader-elect-lease-duration-secs",
            &election.lease.to_string(),
            "--leader-elect-renew-deadline-secs",
            &election.renew.to_string(),
            "--leader-elect-retry-period-secs",
            &election.retry.to_string(),
            "--probes-addr",
            &format!("127.0.0.1:{port}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let proc = Proc::spawn(&args, &dir.join(format!("{identity}.log")))?;
        Ok(Replica {
            identity,
            metrics: format!("http://127.0.0.1:{port}/metrics"),
            proc: Some(proc),
        })
    };
    let replicas = [replica("a")?, replica("b")?];
    let t = Instant::now();
    loop {
        let (running, _) = bootstrap::running_instances(&host).await.unwrap_or((0, 0));
        if running == INSTANCES {
            break;
        }
        if t.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "the replicas did not bring the instances Running in 60 s; logs in {}",
                dir.display()
            ));
        }
        tokio::time::sleep(SAMPLE).await;
    }
    Ok((sim, replicas, host))
}

pub async fn run(
    e: &Experiment,
    signal: LeaderSignal,
    profile: Profile,
    run_id: &str,
) -> ExperimentReport {
    let mut report = ExperimentReport {
        name: e.name.clone(),
        description: e.description.clone(),
        ..Default::default()
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("kairship-{run_id}-{}", e.name));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(err) = std::fs::create_dir_all(&dir) {
        report.skipped = Some(format!("{}: {err}", dir.display()));
        return report;
    }
    let election = Election::of(profile);
    let result = measure(&mut report, &dir, &election, signal, profile).await;
    match result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Err(why) => report.skipped = Some(why),
    }
    report
}

async fn measure(
    report: &mut ExperimentReport,
    dir: &Path,
    election: &Election,
    signal: LeaderSignal,
    profile: Profile,
) -> Result<(), String> {
    let timing = profile.timing();
    let (_sim, mut replicas, host) = start(dir, election).await?;
    let leases: Api<Lease> = Api::namespaced(host, NAMESPACE);
    let start = Instant::now();
    let ms = |i: Instant| u32::try_from(i.duration_since(start).as_millis()).unwrap_or(u32::MAX);
    let mut samples: Vec<Sample> = Vec::new();
    let sample = |replicas: &[Replica; 2]| {
        let urls = [replicas[0].metrics.clone(), replicas[1].metrics.clone()];
        let leases = leases.clone();
        async move {
            let (h, a, b) = tokio::join!(holder(&leases), scrape(&urls[0]), scrape(&urls[1]));
            (h, [a, b])
        }
    };
    let mut baseline_until = Instant::now() + timing.baseline;
    // Baseline: one leader, statuses written.
    let leader = loop {
        let (h, r) = sample(&replicas).await;
        samples.push(Sample {
            t_ms: ms(Instant::now()),
            holder: h.clone(),
            replicas: r,
        });
        if Instant::now() >= baseline_until {
            if let Some(i) = h
                .as_ref()
                .and_then(|h| replicas.iter().position(|r| &r.identity == h))
            {
                break i;
            }
            if start.elapsed() > timing.baseline + Duration::from_secs(30) {
                return Err("no replica held the lease".into());
            }
            baseline_until = Instant::now();
        }
        tokio::time::sleep(SAMPLE).await;
    };
    let other = 1 - leader;
    let (old, new) = (
        replicas[leader].identity.clone(),
        replicas[other].identity.clone(),
    );
    report.victim = Some(format!("leader {old}"));
    let writes_before = scrape(&replicas[leader].metrics)
        .await
        .map(|s| s.writes)
        .unwrap_or_default();
    info!(leader = %old, ?signal, "fault on");
    let fault_start = Instant::now();
    match signal {
        LeaderSignal::Kill => {
            // Dropping the process kills it with SIGKILL.
            replicas[leader].proc = None;
        }
        LeaderSignal::Stop => {
            let p = replicas[leader]
                .proc
                .as_mut()
                .ok_or("the leader process is gone")?;
            p.signal(rustix::process::Signal::STOP)?;
            p.stopped = true;
        }
    }
    // Failover: the other replica holds the Lease and says it leads; then its writes.
    let bound = Duration::from_secs(election.lease + 15);
    let mut failover = None;
    let mut resumed = None;
    let new_writes_at_fault = samples
        .last()
        .and_then(|s| s.replicas[other])
        .map(|s| s.writes)
        .unwrap_or_default();
    while fault_start.elapsed() < bound && resumed.is_none() {
        let (h, r) = sample(&replicas).await;
        let now = Instant::now();
        if failover.is_none()
            && h.as_deref() == Some(new.as_str())
            && r[other].is_some_and(|s| s.leader)
        {
            failover = Some(now.duration_since(fault_start));
        }
        if failover.is_some() && r[other].is_some_and(|s| s.writes > new_writes_at_fault) {
            resumed = Some(now.duration_since(fault_start));
        }
        samples.push(Sample {
            t_ms: ms(now),
            holder: h,
            replicas: r,
        });
        tokio::time::sleep(SAMPLE).await;
    }
    // The stopped leader comes back: it must step down without writing.
    let mut deposed_writes = 0;
    let mut stepped_down = None;
    let fault_end;
    match signal {
        LeaderSignal::Kill => fault_end = Instant::now(),
        LeaderSignal::Stop => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if let Some(p) = replicas[leader].proc.as_mut() {
                p.signal(rustix::process::Signal::CONT)?;
                p.stopped = false;
            }
            fault_end = Instant::now();
            let watch_until = fault_end + Duration::from_secs(election.lease + 3);
            while Instant::now() < watch_until {
                let (h, r) = sample(&replicas).await;
                let now = Instant::now();
                if let Some(s) = r[leader] {
                    deposed_writes = deposed_writes.max(s.writes.saturating_sub(writes_before));
                    if !s.leader && stepped_down.is_none() {
                        stepped_down = Some(now.duration_since(fault_end));
                    }
                }
                samples.push(Sample {
                    t_ms: ms(now),
                    holder: h,
                    replicas: r,
                });
                tokio::time::sleep(SAMPLE).await;
            }
        }
    }
    // Both replicas answering and claiming the lease at once.
    let both_leading = samples
        .iter()
        .filter(|s| s.replicas.iter().all(|r| r.is_some_and(|r| r.leader)))
        .count();
    let end = Instant::now();
    report.fault_start_s = f64::from(ms(fault_start)) / 1000.0;
    report.fault_end_s = f64::from(ms(fault_end)) / 1000.0;
    report.end_s = f64::from(ms(end)) / 1000.0;
    report.detection_s = failover.map(|d| d.as_secs_f64());
    report.recovery_s = resumed.map(|d| d.as_secs_f64());
    report.series = series(&samples, ms(end));
    // As with client-go, a standby counts the lease duration from when it last *saw* the
    // lease renewed, and it looks every retry period (plus up to a fifth of it as jitter):
    // takeover can come two such periods after the lease would expire; 0.5 s more for
    // the runner's 200 ms sampling and process scheduling.
    let limit = election.lease as f64 + 2.4 * election.retry as f64 + 0.5;
    let secs =
        |d: Option<Duration>| d.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64()));
    let mut goals = vec![
        Goal {
            name: format!("{new} took over"),
            target: format!("<= {limit:.1} s (lease + 2 jittered retries)"),
            actual: secs(failover),
            ok: failover.is_some_and(|d| d.as_secs_f64() <= limit),
            enforced: true,
        },
        // The first write may meet the old leader's resourceVersion (409, by design: the
        // fence) and go out again on the next tick, 2 s later.
        Goal {
            name: "status writes resumed".into(),
            target: format!("<= {:.1} s (takeover + 2 ticks)", limit + 4.0),
            actual: secs(resumed),
            ok: resumed.is_some_and(|d| d.as_secs_f64() <= limit + 4.0),
            enforced: true,
        },
        Goal {
            name: "samples with two leaders".into(),
            target: "0".into(),
            actual: both_leading.to_string(),
            ok: both_leading == 0,
            enforced: true,
        },
    ];
    if signal == LeaderSignal::Stop {
        goals.push(Goal {
            name: format!("writes by {old} once deposed"),
            target: "0".into(),
            actual: deposed_writes.to_string(),
            ok: deposed_writes == 0,
            enforced: true,
        });
        goals.push(Goal {
            name: format!("{old} stepped down after SIGCONT"),
            target: format!("<= {} s", election.renew),
            actual: secs(stepped_down),
            ok: stepped_down.is_some_and(|d| d.as_secs() <= election.renew),
            enforced: true,
        });
    }
    report.passed = goals.iter().all(|g| g.ok || !g.enforced);
    report.goals = goals;
    Ok(())
}

/// Per second: whether some live replica led (the band), for the picture.
fn series(samples: &[Sample], end_ms: u32) -> Vec<Point> {
    (0..=end_ms / 1000)
        .map(|t| {
            let within: Vec<&Sample> = samples.iter().filter(|s| s.t_ms / 1000 == t).collect();
            let led = within.iter().any(|s| {
                s.holder.is_some() && s.replicas.iter().any(|r| r.is_some_and(|r| r.leader))
            });
            Point {
                t_s: t,
                healthy_p99_ms: None,
                victim_phase: (!within.is_empty())
                    .then(|| if led { "Running" } else { "Unreachable" }.to_string()),
            }
        })
        .collect()
}
