//! `kairship run` as an operator starts it, with no sharding flag at all: two replicas
//! against one host share the instances out (each records the ones it runs), and a
//! request to either answers for every instance, the other's passed over TLS verified with
//! the CA that follows the serving certificate in `--tls-cert-file`. A replica that has no
//! CA to verify its peers with does not start, and says what to pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kairship::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
use kairship_test_support::harness::Env;
use kairship_test_support::process::StopOnDrop;
use kube::api::{Api, PostParams};

use super::{owner, ADMIN};
use crate::common::eventually;

const FLEET: usize = 6;

fn free_port() -> u16 {
    kairship_realfleet::process::free_port().expect("a free port")
}

/// `kairship run --identity <name>` with TLS, token auth and short Leases, nothing about
/// shards but `extra`; its HTTPS address and its probes address.
fn run(
    env: &Env,
    dir: &Path,
    name: &str,
    (cert, key): (&Path, &Path),
    log: &Path,
    extra: &[String],
) -> (StopOnDrop, String, String) {
    let (grpc, https, probes) = (free_port(), free_port(), free_port());
    let out = std::fs::File::create(log).expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args(["run", "--kubeconfig"])
        .arg(env.sim.kubeconfig("host"))
        .args(["--identity", name, "--tls-cert-file"])
        .arg(cert)
        .arg("--tls-key-file")
        .arg(key)
        .arg("--token-auth-file")
        .arg(dir.join("tokens.csv"))
        .args([
            "--leader-elect=true".to_string(),
            "--leader-elect-namespace=kairship-system".to_string(),
            "--leader-elect-lease-duration-secs=3".to_string(),
            "--leader-elect-renew-deadline-secs=2".to_string(),
            "--leader-elect-retry-period-secs=1".to_string(),
            format!("--grpc-addr=127.0.0.1:{grpc}"),
            format!("--http-addr=127.0.0.1:{https}"),
            format!("--probes-addr=127.0.0.1:{probes}"),
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::from(out))
        .spawn()
        .expect("kairship run starts");
    (
        StopOnDrop(child),
        format!("https://127.0.0.1:{https}"),
        format!("127.0.0.1:{probes}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kairship_run_shards_by_default_and_needs_a_peer_ca() {
    let env = Env::start(FLEET).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    };
    let cert = kairship_wire::tls::generate("kairship").expect("cert");
    // cert-manager's tls.crt may carry the chain; here the serving certificate, then its CA.
    let chain = write("chain.crt", &format!("{}{}", cert.cert_pem, cert.ca_pem));
    let leaf = write("leaf.crt", &cert.cert_pem);
    let key = write("tls.key", &cert.key_pem);
    write("tokens.csv", &format!("{ADMIN},root,0,\"ops\"\n"));
    let bindings: Api<InstanceRoleBinding> = Api::all(env.host.clone());
    let spec = InstanceRoleBindingSpec {
        role: Role::Admin,
        instances: vec!["*".into()],
        subjects: vec![Subject {
            kind: SubjectKind::Group,
            name: "ops".into(),
        }],
    };
    bindings
        .create(
            &PostParams::default(),
            &InstanceRoleBinding::new("ops", spec),
        )
        .await
        .expect("binding");

    // No CA after the serving certificate and no --peer-ca-file: it does not start.
    let refused = Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args(["run", "--kubeconfig"])
        .arg(env.sim.kubeconfig("host"))
        .arg("--tls-cert-file")
        .arg(&leaf)
        .arg("--tls-key-file")
        .arg(&key)
        .arg("--token-auth-file")
        .arg(dir.path().join("tokens.csv"))
        .args(["--probes-addr=127.0.0.1:0"])
        .output()
        .expect("kairship run");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "started without a peer CA: {said}"
    );
    assert!(
        said.contains("--peer-ca-file") && said.contains("--shards=false"),
        "{said}"
    );

    let (_a, https_a, probes_a) = run(
        &env,
        dir.path(),
        "alpha",
        (&chain, &key),
        &dir.path().join("alpha.log"),
        &[],
    );
    let (_b, _, _) = run(
        &env,
        dir.path(),
        "beta",
        (&chain, &key),
        &dir.path().join("beta.log"),
        &[],
    );
    let names: Vec<String> = (1..=FLEET).map(|i| format!("karmada-{i}")).collect();
    for n in &names {
        env.create_external(n).await;
    }
    let logs = || {
        ["alpha", "beta"]
            .map(|r| {
                kairship_realfleet::process::log_tail(&dir.path().join(format!("{r}.log")), 15)
            })
            .join("\n")
    };
    let owners = eventually(Duration::from_secs(60), "every instance owned", || async {
        let mut owners = Vec::new();
        for n in &names {
            owners.push(owner(&env, n).await?);
        }
        Some(owners)
    })
    .await;
    assert!(
        owners.iter().any(|o| o == "alpha") && owners.iter().any(|o| o == "beta"),
        "both replicas own some: {owners:?}\n{}",
        logs()
    );
    println!("owners: {owners:?}");
    // Every instance's Karmada answers through alpha's proxy (the instance's own
    // karmada-apiserver, reached by its owner's actor): beta's are passed to beta.
    let kc = kairship_wire::kubeconfig::build("alpha", &https_a, &cert.ca_pem, ADMIN);
    let path = dir.path().join("alpha.kubeconfig");
    kairship_wire::kubeconfig::write(&path, &kc).expect("write");
    let client = crate::common::client_from(&path).await;
    for n in &names {
        let path = super::proxied(n, "/apis/cluster.karmada.io/v1alpha1/clusters");
        let (code, body) = eventually(
            Duration::from_secs(30),
            &format!("{n} through alpha"),
            || {
                let client = client.clone();
                let path = path.clone();
                async move {
                    let (code, body) = super::get(&client, &path).await;
                    (code == 200).then_some((code, body))
                }
            },
        )
        .await;
        assert_eq!(code, 200, "{n}: {body}");
        assert!(body.contains("ClusterList"), "{n}: {body}");
    }
    // Ready: its peers can verify it.
    let (code, body) = reqwest_like_get(&format!("http://{probes_a}/readyz")).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    // A replica given a peer CA that did not sign the serving certificate starts, but is
    // not ready, and says why.
    let other = kairship_wire::tls::generate("someone-else").expect("cert");
    let other_ca = write("other-ca.crt", &other.ca_pem);
    let (_c, _, probes_c) = run(
        &env,
        dir.path(),
        "gamma",
        (&chain, &key),
        &dir.path().join("gamma.log"),
        &[format!("--peer-ca-file={}", other_ca.display())],
    );
    let (code, body) = eventually(
        Duration::from_secs(60),
        "gamma says it is not ready",
        || {
            let probes = probes_c.clone();
            async move {
                let (code, body) = reqwest_like_get(&format!("http://{probes}/readyz")).await;
                body.contains("verifying this replica as a peer would")
                    .then_some((code, body))
            }
        },
    )
    .await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("--peer-ca-file"), "{body}");
}

/// A plain HTTP GET of `url` (`http://host:port/path`, the probes port): its status and
/// body; 0 when unanswered.
async fn reqwest_like_get(url: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some((host, path)) = url.strip_prefix("http://").and_then(|r| r.split_once('/')) else {
        return (0, String::new());
    };
    let get = async {
        let mut tcp = tokio::net::TcpStream::connect(host).await.ok()?;
        let req = format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.ok()?;
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.ok()?;
        let (head, body) = answer.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), get)
        .await
        .ok()
        .flatten()
        .unwrap_or((0, String::new()))
}
