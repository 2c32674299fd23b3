//! The upstream nginx sample (`../shared/karmada/samples/`) as real Karmada leaves it:
//! one scenario, run against the simulated fleet and the real one, so both must agree.

use std::process::Output;
use std::time::Duration;

use crate::wait;
use serde_json::Value;

fn run(kubectl: &dyn Fn(&[&str]) -> Output, args: &[&str]) -> String {
    let out = kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(kubectl: &dyn Fn(&[&str]) -> Output, args: &[&str]) -> Value {
    serde_json::from_str(&run(kubectl, args)).unwrap_or(Value::Null)
}

fn placement(kubectl: &dyn Fn(&[&str]) -> Output) -> Vec<(String, i64)> {
    let rb = json(
        kubectl,
        &[
            "get",
            "resourcebindings.work.karmada.io",
            "nginx-deployment",
            "-n",
            "default",
            "-o",
            "json",
        ],
    );
    let mut got: Vec<(String, i64)> = rb["spec"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["replicas"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    got.sort();
    got
}

/// The nginx Work in `karmada-es-<cluster>`, if any: its manifest.
fn manifest_on(kubectl: &dyn Fn(&[&str]) -> Output, cluster: &str) -> Option<Value> {
    let works = json(
        kubectl,
        &[
            "get",
            "works.work.karmada.io",
            "-n",
            &format!("karmada-es-{cluster}"),
            "-o",
            "json",
        ],
    );
    works["items"].as_array()?.iter().find_map(|w| {
        let m = &w["spec"]["workload"]["manifests"][0];
        (m["kind"] == "Deployment" && m["metadata"]["name"] == "nginx").then(|| m.clone())
    })
}

/// `samples`: the directory of the upstream samples, applied first (or `None` when the
/// fleet already holds them).
pub fn nginx_sample(kubectl: &dyn Fn(&[&str]) -> Output, samples: Option<&str>, within: Duration) {
    if let Some(dir) = samples {
        run(kubectl, &["apply", "-n", "default", "-f", dir]);
    }
    let two = vec![("member1".to_string(), 1), ("member2".to_string(), 1)];
    wait(within, "nginx placed 1/1 on member1 and member2", || {
        (placement(kubectl) == two).then_some(())
    });
    // Works carry the OverridePolicy's changes: labels on member2, annotations on member1.
    let m2 = wait(within, "the nginx Work for member2", || {
        manifest_on(kubectl, "member2")
    });
    assert_eq!(m2["metadata"]["labels"]["env"], "skoala-dev", "{m2}");
    assert_eq!(m2["metadata"]["labels"]["env-stat"], "skoala-stage", "{m2}");
    assert_eq!(m2["spec"]["replicas"], 1, "{m2}");
    let m1 = wait(within, "the nginx Work for member1", || {
        manifest_on(kubectl, "member1")
    });
    assert_eq!(m1["metadata"]["annotations"]["env"], "skoala-stage", "{m1}");
    assert!(m1["metadata"]["labels"]["env"].is_null(), "{m1}");
    let clusters = json(kubectl, &["get", "clusters", "-o", "json"]);
    if clusters["items"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["metadata"]["name"] == "member3")
    {
        assert!(
            manifest_on(kubectl, "member3").is_none(),
            "nginx must not run on member3"
        );
    }
    wait_ready(kubectl, within, 2);
    // Scaling re-divides: 2 and 2.
    scale(kubectl, 4);
    let four = vec![("member1".to_string(), 2), ("member2".to_string(), 2)];
    wait(within, "nginx re-divided 2/2", || {
        (placement(kubectl) == four).then_some(())
    });
    wait_ready(kubectl, within, 4);
    karmada_events(kubectl, within);
    scale(kubectl, 2);
}

/// Karmada's detector, scheduler and binding controller record events on the template,
/// with Karmada's reasons and messages (the console lists them).
fn karmada_events(kubectl: &dyn Fn(&[&str]) -> Output, within: Duration) {
    let about_nginx = |reason: &str| -> Vec<String> {
        let list = json(kubectl, &["get", "events", "-n", "default", "-o", "json"]);
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| {
                e["reason"] == reason
                    && e["involvedObject"]["kind"] == "Deployment"
                    && e["involvedObject"]["name"] == "nginx"
            })
            .filter_map(|e| e["message"].as_str().map(String::from))
            .collect()
    };
    let has = |reason: &str, want: &dyn Fn(&str) -> bool| {
        wait(within, &format!("a {reason} event about nginx"), || {
            about_nginx(reason).iter().any(|m| want(m)).then_some(())
        })
    };
    has("ApplyPolicySucceed", &|m| {
        m == "Apply policy(default/nginx-propagation) succeed"
    });
    has("ScheduleBindingSucceed", &|m| {
        m.starts_with("Binding has been scheduled successfully. Result: {")
            && m.contains("member1:2")
            && m.contains("member2:2")
    });
    has("SyncWorkSucceed", &|m| {
        m == "Sync work of ResourceBinding(default/nginx-deployment) successful."
    });
}

fn scale(kubectl: &dyn Fn(&[&str]) -> Output, replicas: u32) {
    let to = format!("--replicas={replicas}");
    run(
        kubectl,
        &["scale", "deployment", "nginx", "-n", "default", &to],
    );
}

fn wait_ready(kubectl: &dyn Fn(&[&str]) -> Output, within: Duration, replicas: i64) {
    wait(
        within,
        &format!("the template's readyReplicas {replicas}"),
        || {
            let d = json(
                kubectl,
                &["get", "deployment", "nginx", "-n", "default", "-o", "json"],
            );
            (d["status"]["readyReplicas"] == replicas).then_some(())
        },
    );
}
