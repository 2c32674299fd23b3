//! `kairship demo --replicas N`: sharding shown on one machine. The demo's own process is
//! the first replica (`demo-1`, the addresses endpoints.json names); the others are
//! `kairship run` processes of the same binary against the same host, with the same
//! certificate (its CA after it in the chain, so peers verify each other) and the same
//! tokens. Each holds a shard Lease and runs the instances the ring gives it; any of them
//! answers for every instance. A replica killed by hand loses its instances to the others
//! once its Lease lapses. The others stop with the demo: they are told to stop when their
//! standard input closes, which happens however the demo ends.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::api::forward::ForwardConfig;
use crate::host::leader::{process_identity, LeaderConfig};
use crate::host::shards::ShardConfig;
use crate::Error;

/// Where the leader Lease and the shard Leases live, as in the single-replica demo.
pub const LEASE_NAMESPACE: &str = "kube-system";

/// The name of replica `i` (from 1).
pub fn name(i: usize) -> String {
    format!("demo-{i}")
}

/// The first replica's identity, Leases and forwarding, in this process.
pub struct First {
    pub identity: String,
    pub leader: LeaderConfig,
    pub shards: ShardConfig,
    pub forward: ForwardConfig,
}

/// How the first replica is sharded, serving at `http_addr` (its port known beforehand:
/// peers are told it) with the CA `ca_pem`.
pub fn first(http_addr: SocketAddr, ca_pem: &str) -> First {
    let identity = process_identity(&name(1));
    let leader = LeaderConfig::new(LEASE_NAMESPACE, "kairship-controller-manager", &identity);
    let shards = ShardConfig {
        address: Some(format!("https://{http_addr}")),
        ..ShardConfig::new(LEASE_NAMESPACE, &name(1), &identity)
    };
    let forward = ForwardConfig {
        ca_pem: ca_pem.to_string(),
        server_name: "localhost".into(),
        head_timeout: Duration::from_secs(10),
        handoff_wait: ForwardConfig::default_handoff_wait(leader.lease_duration),
    };
    First {
        identity,
        leader,
        shards,
        forward,
    }
}

/// A port free on loopback now, for an address that must be known before it is bound.
pub fn free_port() -> Result<u16, Error> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Usage(format!("finding a free port: {e}")))
}

/// One replica in a process of its own.
pub struct Replica {
    pub name: String,
    pub https: String,
    pub log: PathBuf,
    child: Child,
    /// Held open: the replica stops when it closes.
    stdin: Option<ChildStdin>,
}

impl Replica {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// What the other replicas are started with.
pub struct Launch<'a> {
    pub dir: &'a Path,
    pub host_kubeconfig: &'a Path,
    pub cert: &'a kairship_wire::tls::ServingCert,
    pub token_file: &'a Path,
    pub webhook_secret: &'a Path,
    /// Flags the first replica's settings stand for, passed on as `kairship run` takes them.
    pub flags: Vec<String>,
}

/// Starts replicas 2..=`count`; on an error, those started are stopped.
pub fn start(count: usize, launch: &Launch<'_>) -> Result<Vec<Replica>, Error> {
    let io = |what: String| move |e: std::io::Error| Error::Usage(format!("{what}: {e}"));
    let chain = launch.dir.join("replica-tls.crt");
    let key = launch.dir.join("replica-tls.key");
    // The CA after the serving certificate: `kairship run` takes its peer CA from there.
    std::fs::write(
        &chain,
        format!("{}{}", launch.cert.cert_pem, launch.cert.ca_pem),
    )
    .map_err(io(format!("writing {}", chain.display())))?;
    write_private(&key, &launch.cert.key_pem).map_err(io(format!("writing {}", key.display())))?;
    let exe = std::env::current_exe().map_err(io("finding this program".into()))?;
    let mut started = Vec::new();
    for i in 2..=count {
        let (https, grpc) = (free_port()?, free_port()?);
        let name = name(i);
        let log = launch.dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).map_err(io(format!("creating {}", log.display())))?;
        let spawned = Command::new(&exe)
            .arg("run")
            .arg("--kubeconfig")
            .arg(launch.host_kubeconfig)
            .args(["--identity", &name, "--tls-cert-file"])
            .arg(&chain)
            .arg("--tls-key-file")
            .arg(&key)
            .arg("--token-auth-file")
            .arg(launch.token_file)
            .arg("--webhook-secret-file")
            .arg(launch.webhook_secret)
            .arg("--audit-log-path")
            .arg(launch.dir.join(format!("audit-{name}.log")))
            .args([
                format!("--http-addr=127.0.0.1:{https}"),
                format!("--grpc-addr=127.0.0.1:{grpc}"),
                "--probes-addr=127.0.0.1:0".to_string(),
                "--leader-elect=true".to_string(),
                format!("--leader-elect-namespace={LEASE_NAMESPACE}"),
                "--stop-when-stdin-closes".to_string(),
            ])
            .args(&launch.flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                stop(started);
                return Err(Error::Usage(format!("starting replica {name}: {e}")));
            }
        };
        let stdin = child.stdin.take();
        started.push(Replica {
            name,
            https: format!("https://127.0.0.1:{https}"),
            log,
            child,
            stdin,
        });
    }
    Ok(started)
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(text.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

/// A replica that has already ended, with the end of its log.
pub fn ended(replicas: &mut [Replica]) -> Option<String> {
    replicas.iter_mut().find_map(|r| {
        let status = r.child.try_wait().ok()??;
        let log = std::fs::read_to_string(&r.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(10).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Some(format!(
            "replica {} ended ({status}); its log ({}) ends:\n{}",
            r.name,
            r.log.display(),
            tail.join("\n")
        ))
    })
}

/// Stops the replicas as SIGTERM would (their instances handed over), each given 20 s,
/// then killed.
pub fn stop(replicas: Vec<Replica>) {
    let mut replicas = replicas;
    for r in &mut replicas {
        r.stdin.take();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for mut r in replicas {
        while std::time::Instant::now() < deadline {
            if !matches!(r.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if matches!(r.child.try_wait(), Ok(None)) {
            let _ = r.child.kill();
        }
        let _ = r.child.wait();
    }
}

/// Each instance's recorded owner (a replica's name), once every one of `names` has one,
/// waiting up to `within`.
pub async fn owners(
    host: &kube::Client,
    names: &[String],
    within: Duration,
) -> Result<BTreeMap<String, String>, Error> {
    use crate::host::shards::handoff::recorded;
    let api: kube::Api<crate::crd::Instance> = kube::Api::all(host.clone());
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let listed = tokio::time::timeout(Duration::from_secs(10), api.list(&Default::default()))
            .await
            .map_err(|_| Error::Usage("listing Instances: no answer in 10 s".into()))?
            .map_err(|e| Error::Usage(format!("listing Instances: {e}")))?;
        let owners: BTreeMap<String, String> = listed
            .items
            .iter()
            .filter_map(|i| Some((i.metadata.name.clone()?, recorded(i)?.to_string())))
            .collect();
        if names.iter().all(|n| owners.contains_key(n)) {
            return Ok(owners);
        }
        if tokio::time::Instant::now() >= deadline {
            let missing: Vec<&String> = names.iter().filter(|n| !owners.contains_key(*n)).collect();
            return Err(Error::Usage(format!(
                "no replica took {missing:?} within {within:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
