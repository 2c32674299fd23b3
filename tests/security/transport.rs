//! Finding: gRPC was plain text in production (no TLS option; `kairship ctl` always
//! dialled `http://`), so bearer tokens crossed the pod network in clear. `kairship run`
//! now serves the gRPC port with its certificate unless told `--grpc-insecure`.

use std::process::{Command, Stdio};
use std::time::Duration;

use kairship::proto::access_service_client::AccessServiceClient;
use kairship::proto::GetCallerRequest;
use kairship_test_support::harness::Env;
use kairship_test_support::process::StopOnDrop;

use crate::with;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub async fn grpc_is_tls_unless_told_otherwise() {
    let env = Env::start(0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = kairship_wire::tls::generate("kairship").expect("cert");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    };
    let (crt, key, ca) = (
        write("tls.crt", &cert.cert_pem),
        write("tls.key", &cert.key_pem),
        write("ca.crt", &cert.ca_pem),
    );
    let tokens = write("tokens.csv", "ops-token-0123456789,olga,1,\"ops\"\n");
    let (grpc, https, probes) = (free_port(), free_port(), free_port());
    let mut run = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args(["run", "--role", "apiserver", "--kubeconfig"])
            .arg(env.sim.kubeconfig("host"))
            .arg("--tls-cert-file")
            .arg(&crt)
            .arg("--tls-key-file")
            .arg(&key)
            .arg("--token-auth-file")
            .arg(&tokens)
            .args([
                format!("--grpc-addr=127.0.0.1:{grpc}"),
                format!("--http-addr=127.0.0.1:{https}"),
                format!("--probes-addr=127.0.0.1:{probes}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("kairship run starts"),
    );
    let tls =
        kairship::cli::ctl::grpc_endpoint(&format!("https://127.0.0.1:{grpc}"), Some(&cert.ca_pem))
            .expect("endpoint");
    let me =
        kairship_test_support::eventually(Duration::from_secs(30), "gRPC over TLS answers", || {
            let tls = tls.clone();
            async move {
                let channel = tls.connect().await.ok()?;
                AccessServiceClient::new(channel)
                    .get_caller(with("ops-token-0123456789", GetCallerRequest {}))
                    .await
                    .ok()
            }
        })
        .await
        .into_inner();
    assert_eq!(me.name, "olga");
    // A client speaking plain text gets nothing: no token crosses in clear.
    let plain = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{grpc}"))
        .expect("address")
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(3))
        .connect_lazy();
    let refused = AccessServiceClient::new(plain)
        .get_caller(with("ops-token-0123456789", GetCallerRequest {}))
        .await;
    assert!(refused.is_err(), "plain text answered: {refused:?}");
    // The HTTPS port serves gRPC too, with the same certificate.
    let on_https = kairship::cli::ctl::grpc_endpoint(
        &format!("https://127.0.0.1:{https}"),
        Some(&cert.ca_pem),
    )
    .expect("endpoint")
    .connect()
    .await
    .expect("gRPC on the HTTPS port");
    AccessServiceClient::new(on_https)
        .get_caller(with("ops-token-0123456789", GetCallerRequest {}))
        .await
        .expect("gRPC on the HTTPS port answers");
    // kairship ctl verifies the certificate with the CA it is given.
    let ctl = |ca: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args(["ctl", "--grpc"])
            .arg(format!("https://127.0.0.1:{grpc}"))
            .arg("--ca-file")
            .arg(ca)
            .args(["--token", "ops-token-0123456789", "whoami"])
            .output()
            .expect("kairship ctl")
    };
    let ok = ctl(&ca);
    assert!(
        ok.status.success() && String::from_utf8_lossy(&ok.stdout).contains("olga"),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let other = kairship_wire::tls::generate("someone-else").expect("cert");
    let wrong = ctl(&write("other-ca.crt", &other.ca_pem));
    assert!(
        !wrong.status.success(),
        "a certificate the given CA did not sign is refused"
    );
    kairship_test_support::process::stop(&mut run.0, Duration::from_secs(10));
    println!("attack: plain-text gRPC to kairship run -> refused; TLS with the CA -> served");
}
