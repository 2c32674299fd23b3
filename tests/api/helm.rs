//! helm through Kairship's proxy on the simulator, as it behaves directly: a chart
//! installed, listed, upgraded, rolled back, its history and values read, then
//! uninstalled (with --wait, and again: not found), through the instance's host, through
//! the path form, and straight to the simulated karmada-apiserver, with the same outcomes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::server::Api;

fn helm_bin() -> PathBuf {
    let helm = kairship_realfleet::default_bin_dir().join("helm");
    assert!(
        helm.is_file(),
        "{} missing: run scripts/real-fleet/build.sh",
        helm.display()
    );
    helm
}

/// A chart of a ConfigMap and a Deployment, its replicas and data from values.
fn chart(dir: &Path) -> PathBuf {
    let c = dir.join("web");
    std::fs::create_dir_all(c.join("templates")).expect("chart dir");
    std::fs::write(
        c.join("Chart.yaml"),
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    )
    .expect("Chart.yaml");
    std::fs::write(c.join("values.yaml"), "replicas: 1\ngreeting: hello\n").expect("values");
    std::fs::write(
        c.join("templates/all.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"{{ .Release.Name }}-config\"}\ndata: {greeting: \"{{ .Values.greeting }}\"}\n---\n\
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: \"{{ .Release.Name }}\"}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector: {matchLabels: {app: \"{{ .Release.Name }}\"}}\n  template:\n    metadata: {labels: {app: \"{{ .Release.Name }}\"}}\n    spec: {containers: [{name: web, image: nginx}]}\n",
    )
    .expect("template");
    c
}

/// Each step's outcome: whether it succeeded, and its output with what differs by run
/// (times, the release name) taken out.
fn steps(kubeconfig: &Path, chart: &Path, release: &str) -> Vec<(String, bool, String)> {
    let helm = helm_bin();
    let cache = kubeconfig.with_extension("helm-cache");
    let chart = chart.to_str().expect("path");
    let run = |args: &[&str]| {
        let out = Command::new(&helm)
            .args(args)
            .args(["-n", "default", "--kubeconfig"])
            .arg(kubeconfig)
            .env("HELM_CACHE_HOME", &cache)
            .env("HELM_CONFIG_HOME", &cache)
            .env("HELM_DATA_HOME", &cache)
            .output()
            .expect("helm runs");
        let text = String::from_utf8_lossy(&out.stdout).replace(release, "RELEASE");
        let text: String = text
            .lines()
            .map(|l| {
                // Times: a release's LAST DEPLOYED / UPDATED column.
                l.split('\t')
                    .filter(|c| !c.contains(" +0000 UTC") && !c.starts_with("LAST DEPLOYED"))
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .filter(|l| !l.starts_with("LAST DEPLOYED"))
            .collect::<Vec<_>>()
            .join("\n");
        (
            args[0].to_string(),
            out.status.success(),
            text + &String::from_utf8_lossy(&out.stderr).replace(release, "RELEASE"),
        )
    };
    vec![
        run(&["install", release, chart]),
        run(&["list", "--short"]),
        run(&["status", release]),
        run(&["upgrade", release, chart, "--set", "replicas=2,greeting=hi"]),
        run(&["get", "values", release]),
        run(&["history", release, "--max", "5", "-o", "json"]),
        run(&["rollback", release, "1"]),
        run(&["get", "values", release, "--revision", "3"]),
        run(&["uninstall", release, "--wait", "--timeout", "60s"]),
        run(&["uninstall", release]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_through_kairship_behaves_as_it_does_directly() {
    let api = Api::start(1).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = chart(dir.path());
    let direct = api.env.sim.kubeconfig("karmada-1");
    let by_host = api.host_kubeconfig_as("karmada-1", "helm-token");
    let by_path = api.proxy_kubeconfig_as("karmada-1", "helm-token");
    let want = steps(&direct, &chart, "direct");
    let expected_ok = [true, true, true, true, true, true, true, true, true, false];
    let oks: Vec<bool> = want.iter().map(|s| s.1).collect();
    assert_eq!(oks, expected_ok, "directly: {want:#?}");
    assert!(want[9].2.contains("not found"), "{:?}", want[9]);
    for (form, kubeconfig) in [("host", &by_host), ("path", &by_path)] {
        let got = steps(kubeconfig, &chart, &format!("through-{form}"));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                (g.0.as_str(), g.1),
                (w.0.as_str(), w.1),
                "helm {} through the {form} form: {}",
                g.0,
                g.2
            );
            // history's JSON carries times: compare the rest of the steps' outputs.
            if !g.0.starts_with("history") {
                assert_eq!(g.2, w.2, "helm {} through the {form} form", g.0);
            }
        }
    }
    api.stop().await;
}
