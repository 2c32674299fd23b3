//! `kairship demo` as a newcomer runs it: the real binary, endpoints.json as ../shared/DESIGN.md
//! pins it, kubectl through the proxy, the gRPC API, and a clean shutdown on SIGTERM that
//! leaves no port open.

mod replicas;

use std::process::{Command, Stdio};
use std::time::Duration;

use kairship_test_support::process::{self, StopOnDrop};
use kairship_test_support::{poll, PROCESS_POLL};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serves_kubectl_and_grpc_then_stops_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args([
                "demo",
                "--instances",
                "2",
                "--clusters",
                "2",
                "--grpc-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
                "--probes-addr",
                "127.0.0.1:0",
                // The simulator's serving certificates last a year, as kubeadm's do: within
                // this warning, so the condition shows.
                "--certificate-expiry-warning-days",
                "400",
                "--state-dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kairship demo starts"),
    );
    let path = dir.path().join("endpoints.json");
    let endpoints = process::endpoints(&mut demo.0, &path, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("kairship demo: {e}"));
    for key in [
        "grpc",
        "http",
        "ca",
        "sim_admin",
        "host_kubeconfig",
        "instances",
        "tokens",
    ] {
        assert!(
            !endpoints[key].is_null(),
            "endpoints.json lacks {key}: {endpoints}"
        );
    }
    assert_eq!(endpoints["instances"].as_array().map(Vec::len), Some(2));
    assert!(endpoints["http"]
        .as_str()
        .is_some_and(|h| h.starts_with("https://")));
    assert!(endpoints["tokens"]["viewer_instance"].is_string());

    let kubeconfig = endpoints["instances"][0]["kubeconfig"]
        .as_str()
        .expect("kubeconfig")
        .to_string();
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = Command::new(&kubectl)
        .args([
            "--kubeconfig",
            &kubeconfig,
            "get",
            "deployments,propagationpolicies,overridepolicies",
            "-o",
            "name",
        ])
        .output()
        .expect("kubectl");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for obj in [
        "deployment.apps/nginx",
        "propagationpolicy.policy.karmada.io/nginx-propagation",
        "overridepolicy.policy.karmada.io/nginx-op",
    ] {
        assert!(
            listed.contains(obj),
            "{obj} missing from the demo instance: {listed}"
        );
    }

    let grpc = endpoints["grpc"].as_str().expect("grpc").to_string();
    let mut client = kairship::proto::instance_service_client::InstanceServiceClient::connect(
        format!("http://{grpc}"),
    )
    .await
    .expect("grpc connects");
    let as_token = |token: &Value| {
        let mut req = tonic::Request::new(kairship::proto::ListInstancesRequest::default());
        let value = format!("Bearer {}", token.as_str().expect("token"));
        req.metadata_mut()
            .insert("authorization", value.parse().expect("metadata"));
        req
    };
    let refused = client
        .list_instances(kairship::proto::ListInstancesRequest::default())
        .await
        .expect_err("the demo checks tokens");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let viewer = client
        .list_instances(as_token(&endpoints["tokens"]["viewer"]))
        .await
        .expect("viewer lists")
        .into_inner();
    let seen: Vec<_> = viewer
        .instances
        .iter()
        .filter_map(|i| i.metadata.as_ref().map(|m| m.name.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![endpoints["tokens"]["viewer_instance"]
            .as_str()
            .expect("viewer_instance")
            .to_string()],
        "the viewer sees only its instance"
    );
    let list = client
        .list_instances(as_token(&endpoints["tokens"]["admin"]))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.instances.len(), 2);
    assert!(list
        .instances
        .iter()
        .all(|i| i.status.as_ref().is_some_and(|s| s.phase == "Running")));

    // `kairship ctl` finds the API through endpoints.json.
    let ctl = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_kairship"))
            .arg("ctl")
            .arg("--state-dir")
            .arg(dir.path())
            .args(args)
            .output()
            .expect("ctl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, table, err) = ctl(&["instances", "list"]);
    assert!(ok, "{err}");
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.starts_with("NAME") && h.contains("PHASE")),
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.contains("Running")).count(),
        2,
        "{table}"
    );
    // Idle first: kubectl read karmada-1 through Kairship above, nothing reached karmada-2.
    let mut usage = String::new();
    for _ in 0..30 {
        let (ok, table, err) = ctl(&["instances", "usage"]);
        assert!(ok, "{err}");
        usage = table;
        let rows: Vec<&str> = usage.lines().collect();
        if rows.len() == 3
            && rows[1].starts_with("karmada-2")
            && rows[1].contains("never")
            && rows[2].starts_with("karmada-1")
            && rows[2].contains(" ago")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let rows: Vec<&str> = usage.lines().collect();
    assert!(
        rows.first().is_some_and(|h| h.contains("LAST REQUEST"))
            && rows
                .get(1)
                .is_some_and(|r| r.starts_with("karmada-2") && r.contains("never"))
            && rows
                .get(2)
                .is_some_and(|r| r.starts_with("karmada-1") && r.contains(" ago")),
        "{usage}"
    );
    // A kubeconfig from ctl, in the demo's form (the path, the instance's host as TLS
    // server name), readable by its owner only; kubectl's get --raw reaches the instance.
    let file = dir.path().join("from-ctl.kubeconfig");
    let path = file.to_str().expect("a UTF-8 path");
    let (ok, _, err) = ctl(&["kubeconfig", "karmada-2", "--file", path]);
    assert!(ok, "{err}");
    assert!(
        err.contains("TLS server name karmada-2.kairship.localtest"),
        "{err}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .expect("written")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let out = Command::new(&kubectl)
        .args(["--kubeconfig", path, "get", "--raw"])
        .arg("/apis/cluster.karmada.io/v1alpha1/clusters")
        .output()
        .expect("kubectl");
    let clusters = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && clusters.contains("\"member1\""),
        "{clusters}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, json, err) = ctl(&["stats", "karmada-1", "-o", "json"]);
    assert!(ok, "{err}");
    let stats: Value = serde_json::from_str(&json).expect("stats json");
    assert_eq!(stats["clustersTotal"], 2);
    let (ok, actors, _) = ctl(&["actors", "list"]);
    assert!(ok && actors.contains("instance/karmada-2"), "{actors}");
    let (ok, restarted, _) = ctl(&["actors", "restart", "karmada-2", "-o", "yaml"]);
    assert!(
        ok && restarted.contains("instance/karmada-2"),
        "{restarted}"
    );
    // The instance's controllers, one row each with the table's names.
    let (ok, table, err) = ctl(&["actors", "controllers", "karmada-1"]);
    assert!(ok, "{err}");
    let first: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut want = vec!["CONTROLLER"];
    want.extend(kairship::controllers::TABLE.iter().map(|e| e.name));
    assert_eq!(first, want, "{table}");
    // The seeded nginx sample, placed by the simulated Karmada as real Karmada would.
    let placed = poll(Duration::from_secs(60), PROCESS_POLL, || {
        let (ok, out, err) = ctl(&["workloads", "get", "karmada-1", "nginx"]);
        let done =
            ok && out.lines().any(|l| {
                l.split_whitespace().collect::<Vec<_>>() == ["member1", "1", "1", "true", "Healthy"]
            }) && out.lines().any(|l| {
                l.split_whitespace().collect::<Vec<_>>() == ["member2", "1", "1", "true", "Healthy"]
            }) && out.contains("+ /metadata/labels/env: skoala-dev")
                && out.contains("+ /metadata/annotations/env: skoala-stage");
        async move {
            if done {
                Ok(out)
            } else {
                Err(format!("{out}\n{err}"))
            }
        }
    })
    .await
    .unwrap_or_else(|seen| panic!("nginx not placed in time:\n{seen}"));
    assert!(!placed.contains("member3"), "{placed}");
    // The placement table's columns are as wide as its cells, not as the text below it.
    assert!(
        placed
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("CLUSTER   REPLICAS   READY")),
        "{placed}"
    );
    // The certificates the instance is reached with, and the condition on the first expiry.
    let certs = poll(Duration::from_secs(30), PROCESS_POLL, || {
        let (ok, out, err) = ctl(&["instances", "certificates", "karmada-1", "-o", "json"]);
        let found: Value = serde_json::from_str(&out).unwrap_or_default();
        let names: Vec<String> = found["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect();
        let done = ok
            && names.contains(&"karmada-apiserver serving".to_string())
            && names.contains(&"kubeconfig CA".to_string());
        async move {
            match done {
                true => Ok(found),
                false => Err(format!("{out}\n{err}")),
            }
        }
    })
    .await
    .unwrap_or_else(|seen| panic!("certificates not listed:\n{seen}"));
    let serving = certs["certificates"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "karmada-apiserver serving"))
        .cloned()
        .unwrap_or_default();
    let left = serving["notAfter"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| (t.as_second() - jiff::Timestamp::now().as_second()) / 86_400);
    assert!(left.is_some_and(|d| (363..=365).contains(&d)), "{serving}");
    let (ok, json, err) = ctl(&["instances", "get", "karmada-1", "-o", "json"]);
    assert!(ok, "{err}");
    let instance: Value = serde_json::from_str(&json).expect("instance json");
    let expiring = instance["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "CertificatesExpiring"))
        .cloned()
        .unwrap_or_default();
    assert!(
        expiring["status"] == "True" && expiring["reason"] == "ExpiresSoon",
        "{expiring}"
    );
    let (ok, _, err) = ctl(&["instances", "get", "nope"]);
    assert!(!ok && err.contains("NotFound"), "{err}");

    // A backup taken and waited for, listed, restored (everything there already), and a
    // schedule set.
    let (ok, json, err) = ctl(&["backups", "create", "karmada-1", "--wait", "-o", "json"]);
    assert!(ok, "{err}");
    let backup: Value = serde_json::from_str(&json).expect("backup json");
    assert_eq!(backup["phase"], "Completed", "{backup}");
    assert_eq!(backup["resources"]["deployments.apps"], 1, "{backup}");
    let name = backup["name"].as_str().expect("name");
    let (ok, table, err) = ctl(&["backups", "list", "karmada-1"]);
    assert!(
        ok && table.contains(name) && table.contains("Completed"),
        "{table}{err}"
    );
    let (ok, out, err) = ctl(&["backups", "restore", "karmada-1", name, "-o", "json"]);
    assert!(ok, "{out}{err}");
    let restored: Value = serde_json::from_str(&out).expect("restore json");
    assert!(
        restored["created"].is_null() && restored["existing"].as_i64() > Some(0),
        "{restored}"
    );
    let (ok, out, err) = ctl(&[
        "backups",
        "schedule",
        "karmada-1",
        "--every-minutes",
        "720",
        "--keep",
        "3",
    ]);
    assert!(
        ok && out.contains("every 720 minutes, the newest 3 kept"),
        "{out}{err}"
    );
    let (ok, _, err) = ctl(&["backups", "get", "karmada-2", name]);
    assert!(!ok && err.contains("NotFound"), "{err}");

    // SIGTERM: a clean exit, and every port it served is closed afterwards.
    let https = endpoints["http"]
        .as_str()
        .expect("http")
        .trim_start_matches("https://")
        .to_string();
    let admin = endpoints["sim_admin"]
        .as_str()
        .expect("admin")
        .trim_start_matches("http://")
        .to_string();
    // Metrics on the plain-HTTP port, as a scraper reads them.
    let metrics = endpoints["metrics"]
        .as_str()
        .expect("metrics url")
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let mut conn = std::net::TcpStream::connect(&metrics).expect("metrics port");
    use std::io::{Read, Write};
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut scraped = String::new();
    conn.read_to_string(&mut scraped).expect("read");
    assert!(
        scraped.starts_with("HTTP/1.1 200")
            && scraped.contains(
                r#"kairship_instance_phase{karmada_instance="karmada-1",phase="Running"} 1"#
            ),
        "{scraped}"
    );
    let exit = process::stop(&mut demo.0, Duration::from_secs(30))
        .expect("kairship demo stops within 30s of SIGTERM");
    assert!(exit.success(), "demo exited with {exit}");
    for addr in [grpc, https, admin, metrics] {
        assert!(
            std::net::TcpStream::connect(&addr).is_err(),
            "{addr} still accepts connections after shutdown"
        );
    }
    assert!(
        !dir.path().join("endpoints.json").exists(),
        "endpoints.json removed on shutdown"
    );
}

/// A fleet larger than the open-files hard limit allows is refused up front, with the
/// number needed, rather than failing later with "Too many open files".
#[test]
fn a_fleet_too_large_for_the_open_files_limit_is_refused_with_the_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 512 && exec {} demo --instances 1000 --clusters 5 --state-dir {}",
            env!("CARGO_BIN_EXE_kairship"),
            dir.path().display()
        ))
        .output()
        .expect("sh runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1000 instance(s) need about 8256 open files")
            && stderr.contains("only 512"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("endpoints.json").exists(),
        "nothing started"
    );
}
