//! Benchmarks that run Kairship as its users do, each side in its own process: a
//! `kairship sim` fleet, `kairship run` replicas, and what `/proc` says of them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kairship::bootstrap;

/// A child process, killed when dropped (a benchmark that panics leaves nothing behind)
/// or when the benchmark is interrupted ([`on_interrupt_kill_children`]).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        CHILDREN.lock().retain(|p| *p != self.0.id());
    }
}

/// The children running now, for the interrupt handler.
static CHILDREN: parking_lot::Mutex<Vec<u32>> = parking_lot::Mutex::new(Vec::new());

/// On SIGINT or SIGTERM (Ctrl-C, `timeout`), kills every child still running and exits:
/// the destructors that would have killed them do not run when a signal ends the process.
fn on_interrupt_kill_children() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    ONCE.call_once(|| {
        rt.spawn(async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            for pid in CHILDREN.lock().iter() {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
            std::process::exit(130);
        });
    });
}

impl Proc {
    /// SIGKILL now, as a node that dies.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `kairship <args>`, its output to `log`.
pub fn kairship(args: &[&str], log: &Path) -> Proc {
    kairship_with_env(args, &[], log)
}

/// [`kairship`], with `env` added to its environment.
pub fn kairship_with_env(args: &[&str], env: &[(&str, &str)], log: &Path) -> Proc {
    let out = std::fs::File::create(log).expect("log file");
    let bin = env!("CARGO_BIN_EXE_kairship");
    // PROFILE_SIM=FILE: the simulator under heaptrack, its profile written to FILE.zst.
    let profile = std::env::var_os("PROFILE_SIM").filter(|_| args.first() == Some(&"sim"));
    let mut command = if let Some(file) = profile {
        let mut c = Command::new("heaptrack");
        c.arg("-o").arg(file).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let child = command
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::from(out.try_clone().expect("log file")))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("starting kairship");
    on_interrupt_kill_children();
    CHILDREN.lock().push(child.id());
    Proc(child)
}

/// (resident KiB, CPU ticks used so far, open sockets) of a process, from /proc.
pub fn usage(pid: u32) -> (u64, u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = vm_rss_kib(&status);
    let ticks = usage_ticks(pid);
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0);
    (rss, ticks, sockets)
}

/// The `VmRSS` of a `/proc/<pid>/status` text, in KiB (0 if absent).
pub fn vm_rss_kib(status: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

pub async fn host_client(dir: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfigs/host.kubeconfig"))
        .expect("host kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("host config");
    kube::Client::try_from(config).expect("host client")
}

/// Waits for `path`, written by `proc` (whose output is in `log`), at most `limit`; a
/// process that exits first fails the bench at once with the end of its log.
pub async fn wait_for(proc: &mut Proc, log: &Path, path: &Path, what: &str, limit: Duration) {
    let t = Instant::now();
    while !path.exists() {
        if let Ok(Some(status)) = proc.0.try_wait() {
            let out = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = out.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "{what}: the process exited ({status}) first:\n{}",
                tail.join("\n")
            );
        }
        assert!(t.elapsed() < limit, "{what} did not appear in {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `kairship sim` of `n` instances x `clusters` members, each given Kairship's roles and
/// attached to its host as an External Instance in `kairship-system`.
pub struct SimFleet {
    pub dir: PathBuf,
    pub host: kube::Client,
    pub proc: Proc,
}

impl SimFleet {
    pub async fn start(dir: &Path, n: usize, clusters: usize, tick: u64) -> SimFleet {
        let sim_dir: PathBuf = dir.join("sim");
        let log = dir.join("sim.log");
        let mut proc = kairship(
            &[
                "sim",
                "--state-dir",
                sim_dir.to_str().expect("utf-8 path"),
                "--instances",
                &n.to_string(),
                "--clusters",
                &clusters.to_string(),
                "--cluster-tick-secs",
                &tick.to_string(),
                // kube-apiserver sends a watch bookmark about once a minute; the
                // simulator's default of 10 s would be 11,000 watches x 6 per minute here.
                "--bookmark-secs",
                "60",
                // One listener for every instance, reached by name, as behind an ingress:
                // 10,000 listeners besides Kairship's connections would pass the open-files
                // limit of this machine (20,000).
                "--shared-listener",
            ],
            &log,
        );
        wait_for(
            &mut proc,
            &log,
            &sim_dir.join("endpoints.json"),
            "the simulator's endpoints.json",
            Duration::from_secs(300),
        )
        .await;
        let host = host_client(&sim_dir).await;
        super::attach_all(&host, &sim_dir, n, true).await;
        SimFleet {
            dir: sim_dir,
            host,
            proc,
        }
    }

    pub fn host_kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfigs/host.kubeconfig")
    }

    /// Waits until `n` instances are Running, at most `limit`; how long that took.
    pub async fn all_running(&self, n: usize, since: Instant, limit: Duration, log: &Path) {
        loop {
            let running = bootstrap::running_instances(&self.host)
                .await
                .map(|c| c.0)
                .unwrap_or(0);
            if running == n {
                return;
            }
            assert!(
                since.elapsed() < limit,
                "{n} instances not all Running after {limit:?} ({running} are; see {})",
                log.display()
            );
            tokio::time::sleep(poll_every(n)).await;
        }
    }
}

/// How often a bench lists the fleet's Instances while it waits: a LIST of 10,000 every
/// 250 ms kept the simulated host busier than the replicas it measures.
pub fn poll_every(instances: usize) -> Duration {
    Duration::from_millis(250).max(Duration::from_millis(instances as u64 / 2))
}

/// The files a `kairship run` serves with: a TLS key pair and its CA, and a token file
/// giving `token` to user `bench` of group `ops`.
pub struct ServingFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    pub ca_pem: String,
    pub tokens: PathBuf,
}

impl ServingFiles {
    pub fn write(dir: &Path, token: &str) -> Self {
        let cert = kairship_wire::tls::generate("kairship").expect("cert");
        let write = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, body).expect("write");
            p
        };
        ServingFiles {
            cert: write("tls.crt", &cert.cert_pem),
            key: write("tls.key", &cert.key_pem),
            ca: write("ca.crt", &cert.ca_pem),
            ca_pem: cert.ca_pem.clone(),
            tokens: write("tokens.csv", &format!("{token},bench,0,\"ops\"\n")),
        }
    }
}

impl ServingFiles {
    /// `kairship run`'s listeners on loopback (gRPC, HTTPS, probes) and its TLS files.
    pub fn listen_args(&self, grpc: u16, https: u16, probes: u16) -> Vec<String> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        [
            "--grpc-addr".to_string(),
            format!("127.0.0.1:{grpc}"),
            "--http-addr".into(),
            format!("127.0.0.1:{https}"),
            "--probes-addr".into(),
            format!("127.0.0.1:{probes}"),
            "--tls-cert-file".into(),
            path(&self.cert),
            "--tls-key-file".into(),
            path(&self.key),
        ]
        .into()
    }
}

/// Makes group `ops` an admin of every instance (an InstanceRoleBinding on the host).
pub async fn grant_ops_admin(host: &kube::Client) {
    use kairship::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
    let bindings: kube::Api<InstanceRoleBinding> = kube::Api::all(host.clone());
    let spec = InstanceRoleBindingSpec {
        role: Role::Admin,
        instances: vec!["*".into()],
        subjects: vec![Subject {
            kind: SubjectKind::Group,
            name: "ops".into(),
        }],
    };
    let _ = bindings
        .create(
            &kube::api::PostParams::default(),
            &InstanceRoleBinding::new("bench-ops", spec),
        )
        .await;
}

/// A free TCP port on 127.0.0.1 (for a child to bind).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Until process `pid` uses under 5% of a core over a second (at most a minute).
pub async fn settle_process(pid: u32) {
    for _ in 0..60 {
        let before = usage_ticks(pid);
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Ticks are 10 ms: under 5 in a second.
        if usage_ticks(pid).saturating_sub(before) < 5 {
            return;
        }
    }
}

/// The value of gauge `name` (no labels) in the `/metrics` a process serves on plain HTTP
/// at `port` (its probes port); `None` if it is not there.
pub async fn scrape_gauge(port: u16, name: &str) -> Option<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        Some(body)
    };
    let body = tokio::time::timeout(Duration::from_secs(10), fetch)
        .await
        .ok()??;
    body.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok())?
    })
}

/// CPU time (user + system) process `pid` has used, in 10 ms clock ticks.
pub fn usage_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat_ticks(&stat)
}

/// A process's minor page faults so far (`minflt` in /proc/<pid>/stat): a fresh mapping
/// touched, or pages given back to the system touched again.
pub fn minor_faults(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's name, which may hold spaces: state, ppid, pgrp, session,
    // tty_nr, tpgid, flags, minflt.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of a `/proc/<pid>/stat` text, in clock ticks.
fn stat_ticks(stat: &str) -> u64 {
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum()
}
