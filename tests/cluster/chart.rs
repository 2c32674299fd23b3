//! The chart on its own: `helm lint`, `deploy/kairship.yaml` rendered from it without
//! drift, and the values that matter rendering what they promise.

use std::process::Command;

use crate::{helm, helm_path, repo, skip_unless, stdout};

fn chart() -> String {
    repo().join("deploy/chart/kairship").display().to_string()
}

fn helm_built() -> Result<(), String> {
    match helm_path().is_file() {
        true => Ok(()),
        false => Err(format!(
            "{} is missing: run scripts/real-fleet/build.sh",
            helm_path().display()
        )),
    }
}

fn template(values: &[&str]) -> String {
    let chart = chart();
    let mut args = vec![
        "template",
        "kairship",
        chart.as_str(),
        "--namespace",
        "kairship-system",
    ];
    for v in values {
        args.extend(["--set", v]);
    }
    stdout(&helm(None, &args))
}

/// The documents of a rendering, as JSON values.
fn docs(yaml: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(yaml)
        .expect("the rendering is YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn container_args(yaml: &str) -> Vec<String> {
    let deployment = docs(yaml)
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect()
}

#[test]
fn the_chart_lints_and_the_manifests_are_its_rendering() {
    if skip_unless(helm_built()) {
        return;
    }
    let lint = helm(None, &["lint", "--strict", &chart()]);
    assert!(
        stdout(&lint).contains("0 chart(s) failed"),
        "{}",
        stdout(&lint)
    );

    // deploy/kairship.yaml is `helm template` of the defaults under a comment header.
    let on_disk =
        std::fs::read_to_string(repo().join("deploy/kairship.yaml")).expect("deploy/kairship.yaml");
    let body: String = on_disk
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        body == template(&[]),
        "deploy/kairship.yaml drifted from the chart: run scripts/render-manifests.sh"
    );
}

#[test]
fn values_render_what_they_promise() {
    if skip_unless(helm_built()) {
        return;
    }
    let defaults = template(&[]);
    let args = container_args(&defaults);
    for want in [
        "run",
        "--role=all",
        "--leader-elect=true",
        "--leader-elect-namespace=kairship-system",
        "--leader-elect-lease-name=kairship-controller-manager",
        "--shutdown-delay-secs=5",
        "--log-format=json",
        "--token-auth-file=/etc/kairship/auth/tokens/tokens.csv",
        "--tls-cert-file=/etc/kairship/tls/tls.crt",
        // Sharded by default, peers verified with the TLS Secret's CA.
        "--shards",
        "--peer-ca-file=/etc/kairship/tls/ca.crt",
        "--peer-server-name=kairship.kairship-system.svc",
        // The kubeconfigs it hands out trust the TLS Secret's CA.
        "--kubeconfig-ca-file=/etc/kairship/tls/ca.crt",
    ] {
        assert!(
            args.iter().any(|a| a == want),
            "{want} missing from {args:?}"
        );
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--webhook-secret-file")),
        "the webhook is off by default"
    );
    let unsharded = container_args(&template(&["sharding.enabled=false"]));
    assert!(
        unsharded.iter().any(|a| a == "--shards=false")
            && !unsharded.iter().any(|a| a.starts_with("--peer-ca-file")),
        "sharding off says so: {unsharded:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--external-url")),
        "kubeconfigs name the address each request reached by default: {args:?}"
    );
    let outside = container_args(&template(&[
        "externalURL=https://kairship.example.com",
        "tls.caKey=",
    ]));
    assert!(
        outside
            .iter()
            .any(|a| a == "--external-url=https://kairship.example.com")
            && !outside
                .iter()
                .any(|a| a.starts_with("--kubeconfig-ca-file")),
        "an external URL, and no CA for a publicly trusted certificate: {outside:?}"
    );
    let kinds: Vec<String> = docs(&defaults)
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !kinds.contains(&"ServiceMonitor".to_string()),
        "no ServiceMonitor by default: {kinds:?}"
    );
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing: {kinds:?}");
    }

    let oidc = template(&[
        "auth.tokenFile.secretName=",
        "auth.oidc.issuerURL=https://dex.example",
        "auth.oidc.clientID=kairship",
        "auth.oidc.jwksURL=https://dex.example/keys",
        "auth.oidc.caSecretName=dex-ca",
        "auth.webhookSecret.secretName=gm",
        "logFormat=text",
        "extraArgs={--instance-degraded-after-secs=30}",
        "podAnnotations.team=platform",
        "nodeSelector.pool=control",
        "serviceMonitor.enabled=true",
        "replicaCount=5",
    ]);
    let args = container_args(&oidc);
    for want in [
        "--oidc-issuer-url=https://dex.example",
        "--oidc-client-id=kairship",
        "--oidc-jwks-url=https://dex.example/keys",
        "--oidc-ca-file=/etc/kairship/auth/oidc-ca/ca.crt",
        "--webhook-secret-file=/etc/kairship/auth/webhook/webhook.secret",
        "--log-format=text",
        "--instance-degraded-after-secs=30",
    ] {
        assert!(
            args.iter().any(|a| a == want),
            "{want} missing from {args:?}"
        );
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--token-auth-file")),
        "{args:?}"
    );
    let d = docs(&oidc);
    let dep = d
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("Deployment");
    assert_eq!(dep["spec"]["replicas"], 5);
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["team"],
        "platform"
    );
    assert_eq!(
        dep["spec"]["template"]["spec"]["nodeSelector"]["pool"],
        "control"
    );
    assert!(d.iter().any(|d| d["kind"] == "ServiceMonitor"));

    // The controller-manager role serves no API: no TLS, no auth, no API ports.
    let cm = template(&["role=controller-manager", "auth.tokenFile.secretName="]);
    let args = container_args(&cm);
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--tls-") || a.starts_with("--token-")),
        "{args:?}"
    );
    let service = docs(&cm)
        .into_iter()
        .find(|d| d["kind"] == "Service")
        .expect("Service");
    let ports: Vec<&str> = service["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(ports, vec!["metrics"]);

    // Without any identity source the chart refuses, naming what to set.
    let refused = Command::new(helm_path())
        .args([
            "template",
            "kairship",
            &chart(),
            "--set",
            "auth.tokenFile.secretName=",
        ])
        .output()
        .expect("helm");
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains("auth.tokenFile.secretName") && why.contains("auth.oidc.issuerURL"),
        "{why}"
    );
}

/// The alerts and the dashboard render from the chart's files, as they are, only when
/// asked for.
#[test]
fn alerts_and_dashboard_render_from_their_files_when_enabled() {
    if skip_unless(helm_built()) {
        return;
    }
    let off = docs(&template(&[]));
    assert!(!off.iter().any(|d| d["kind"] == "PrometheusRule"));
    let on = docs(&template(&[
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
    ]));
    let read = |p: &str| {
        std::fs::read_to_string(repo().join("deploy/chart/kairship").join(p)).expect("chart file")
    };
    let rules: serde_json::Value =
        serde_saphyr::from_str(&read("rules/kairship.rules.yaml")).expect("rules");
    let rule = on
        .iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    assert_eq!(rule["spec"]["groups"], rules["groups"]);
    let dashboard = on
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["labels"]["grafana_dashboard"] == "1")
        .expect("the dashboard's ConfigMap");
    let keys: Vec<&String> = dashboard["data"]
        .as_object()
        .expect("data")
        .keys()
        .collect();
    assert_eq!(
        keys,
        [
            "kairship-api.json",
            "kairship-caches.json",
            "kairship-fleet.json",
            "kairship-instance.json"
        ],
        "one key per dashboard"
    );
    for key in keys {
        let json: serde_json::Value =
            serde_json::from_str(dashboard["data"][key].as_str().expect("json"))
                .expect("the dashboard is JSON");
        let file: serde_json::Value =
            serde_json::from_str(&read(&format!("dashboards/{key}"))).expect("dashboard");
        assert_eq!(json, file, "{key}");
    }
}
