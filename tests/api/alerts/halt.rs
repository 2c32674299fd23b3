//! A fleet rollout halted by a firing alert, as a real Prometheus (built by
//! scripts/real-fleet) evaluates it: Prometheus scrapes Kairship's HTTPS `/metrics`, a rule
//! a team wrote for the new release fires for the canary once it runs it, and Kairship's
//! leader, reading `/api/v1/alerts` (`--alerts-url`), fails the canary while it soaks,
//! halts the rollout naming the alert, and rolls the canary back. Before Prometheus
//! answers, the rollout holds instead of going on blind.

use std::path::Path;
use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{RolloutOptions, RolloutSpec, StartRolloutRequest};
use kairship_realfleet::process::{free_port, Proc};

use crate::common::eventually;
use crate::rollouts::{rollout_in, step_of};
use crate::server::Api;
use crate::upgrade::status_version;

/// The rule a team would write: the new release misbehaves wherever it runs.
const RULES: &str = r#"groups:
  - name: team
    rules:
      - alert: TeamReleaseBroken
        expr: max by (karmada_instance) (kairship_instance_info{karmada_version="v1.13.0"}) == 1
        labels:
          severity: critical
        annotations:
          summary: "{{ $labels.karmada_instance }} runs v1.13.0, which breaks our workloads"
"#;

fn prometheus_config(target: &str, ca: &Path) -> String {
    format!(
        r#"global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: kairship
    scheme: https
    tls_config:
      ca_file: {ca}
    authorization:
      credentials: metrics-test
    static_configs:
      - targets: ["{target}"]
"#,
        ca = ca.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firing_alert_halts_a_rollout_and_its_canary_is_rolled_back() {
    let prometheus = kairship_realfleet::default_bin_dir().join("prometheus");
    if !prometheus.exists() {
        kairship_test_support::missing_prerequisite(
            "real",
            &format!(
                "{} is not built: run scripts/real-fleet/build.sh",
                prometheus.display()
            ),
        );
        return;
    }
    let port = free_port().expect("a free port");
    let settings = kairship::context::Settings {
        alerts_url: Some(format!("http://127.0.0.1:{port}")),
        ..crate::harness::fast_settings()
    };
    let api = Api::start_settings(1, None, None, settings).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let names = ["team-a", "team-b"];
    crate::rollouts::managed_running(&c, &names, "v1.12.0", "alerts").await;
    let r = RolloutServiceClient::new(api.channel.clone());
    r.clone()
        .start_rollout(StartRolloutRequest {
            name: "to-13".into(),
            spec: Some(RolloutSpec {
                karmada_version: "v1.13.0".into(),
                match_labels: [("tier".to_string(), "alerts".to_string())].into(),
                canary: 1,
                percentages: vec![100],
                ..Default::default()
            }),
            options: Some(RolloutOptions {
                soak_seconds: 600,
                progress_deadline_seconds: 120,
                halt_on_alerts: vec!["TeamRelease*".into()],
                ..Default::default()
            }),
        })
        .await
        .expect("started");

    // Prometheus is not up yet: the rollout holds, nothing starts.
    let held = rollout_in(&r, "to-13", "Halted", Duration::from_secs(30)).await;
    assert!(
        held.reason
            .contains("held until the alerts it halts on can be read"),
        "{}",
        held.reason
    );
    assert!(held.reason.contains(&port.to_string()), "{}", held.reason);
    tokio::time::sleep(Duration::from_secs(3)).await;
    for n in names {
        assert_eq!(step_of(&r, "to-13", n).await, "Pending", "{n} held");
    }

    let dir = api.env.sim.dir.path().join("prometheus");
    std::fs::create_dir_all(&dir).expect("prometheus dir");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &api.ca_pem).expect("ca");
    std::fs::write(dir.join("rules.yaml"), RULES).expect("rules");
    let target = api.https.trim_start_matches("https://").to_string();
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, prometheus_config(&target, &ca)).expect("config");
    let mut prom = Proc::spawn(
        "prometheus",
        &prometheus,
        vec![
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ],
        dir.join("prometheus.log"),
    )
    .expect("prometheus starts");

    // The hold lifts; the canary is changed, and once it runs v1.13.0 the team's alert
    // fires for it while it soaks: failed, the rollout halted naming the alert.
    let halted = eventually(Duration::from_secs(180), "halted by the alert", || {
        let r = r.clone();
        async move {
            let got = r
                .clone()
                .get_rollout(kairship::proto::RolloutName {
                    name: "to-13".into(),
                })
                .await
                .ok()?
                .into_inner();
            (got.phase == "Halted" && got.reason.contains("TeamReleaseBroken")).then_some(got)
        }
    })
    .await;
    let log = kairship_realfleet::process::log_tail(&dir.join("prometheus.log"), 20);
    assert!(
        halted.reason.starts_with("instance \"team-a\" failed: while it soaked after its change, alert TeamReleaseBroken is firing: team-a runs v1.13.0"),
        "{}\n{log}",
        halted.reason
    );
    // Rolled back to the release it ran; the second wave never touched.
    eventually(Duration::from_secs(120), "team-a rolled back", || {
        let (r, c) = (r.clone(), c.clone());
        async move {
            let back = step_of(&r, "to-13", "team-a").await == "RolledBack";
            let v = status_version(&c, "team-a").await;
            (back && v.as_deref() == Some("v1.12.0")).then_some(())
        }
    })
    .await;
    assert_eq!(step_of(&r, "to-13", "team-b").await, "Pending");
    assert_eq!(
        status_version(&c, "team-b").await.as_deref(),
        Some("v1.12.0")
    );
    prom.kill().await;
    api.stop().await;
}
