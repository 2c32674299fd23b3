//! The chart's alert rules and Grafana dashboard against what Kairship exports: every
//! expression parses as PromQL, and every metric, label matcher and grouping label it
//! names is in a live `/metrics` scrape (an alert on a misspelt metric never fires, and
//! nothing else would notice). Each alert carries a severity, a `for`, a summary and a
//! description. Each alert's firing and quiet cases run in promtool (promtool.rs).

mod halt;
mod promtool;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use kairship::proto::instance_service_client::InstanceServiceClient;
use promql_parser::parser::{self, Expr, LabelModifier};
use serde_json::Value;

use crate::server::Api;

/// The chart's Grafana dashboards: the fleet, one instance, the API, caches and watches.
pub(crate) const DASHBOARDS: [&str; 4] = [
    "kairship-fleet.json",
    "kairship-instance.json",
    "kairship-api.json",
    "kairship-caches.json",
];

fn chart_file(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/chart/kairship")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Metric names of a scrape (samples' names, so counters end in `_total` and histograms
/// in `_bucket`/`_sum`/`_count`) with the label names each was seen with.
fn exported(scrape: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, labels) = match line.split_once('{') {
            Some((n, rest)) => (n, rest.split_once('}').map_or("", |(l, _)| l)),
            None => (line.split(' ').next().unwrap_or_default(), ""),
        };
        let set = out.entry(name.to_string()).or_default();
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            if let Some((k, _)) = pair.split_once('=') {
                set.insert(k.to_string());
            }
        }
    }
    out
}

/// What an expression names: metrics with the labels its matchers use, and grouping labels.
#[derive(Default)]
struct Named {
    metrics: Vec<(String, Vec<String>)>,
    grouping: Vec<String>,
}

fn walk(e: &Expr, n: &mut Named) {
    match e {
        Expr::Aggregate(a) => {
            if let Some(LabelModifier::Include(l) | LabelModifier::Exclude(l)) = &a.modifier {
                n.grouping.extend(l.labels.iter().cloned());
            }
            walk(&a.expr, n);
            if let Some(p) = &a.param {
                walk(p, n);
            }
        }
        Expr::Unary(u) => walk(&u.expr, n),
        Expr::Binary(b) => {
            walk(&b.lhs, n);
            walk(&b.rhs, n);
        }
        Expr::Paren(p) => walk(&p.expr, n),
        Expr::Subquery(s) => walk(&s.expr, n),
        Expr::VectorSelector(v) => selector(v, n),
        Expr::MatrixSelector(m) => selector(&m.vs, n),
        Expr::Call(c) => c.args.args.iter().for_each(|a| walk(a, n)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

fn selector(v: &parser::VectorSelector, n: &mut Named) {
    let labels = v
        .matchers
        .matchers
        .iter()
        .map(|m| m.name.clone())
        .filter(|l| l != "__name__")
        .collect();
    n.metrics.push((v.name.clone().unwrap_or_default(), labels));
}

/// Every problem with `expr` against `exported`, named by `what`.
fn check(what: &str, expr: &str, exported: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let parsed = match parser::parse(expr) {
        Ok(e) => e,
        Err(e) => return vec![format!("{what}: not PromQL ({e}): {expr}")],
    };
    let mut n = Named::default();
    walk(&parsed, &mut n);
    let mut problems = Vec::new();
    let mut seen_labels: BTreeSet<String> = ["le".to_string()].into();
    for (metric, labels) in &n.metrics {
        let Some(known) = exported.get(metric) else {
            problems.push(format!("{what}: Kairship exports no {metric:?}"));
            continue;
        };
        seen_labels.extend(known.iter().cloned());
        for l in labels {
            if !known.contains(l) {
                problems.push(format!(
                    "{what}: {metric} has no label {l:?} (it has {known:?})"
                ));
            }
        }
    }
    for g in n.grouping {
        if !seen_labels.contains(&g) {
            problems.push(format!(
                "{what}: groups by {g:?}, which none of its metrics has"
            ));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_rules_and_dashboard_query_what_kairship_exports() {
    let api = Api::start(1).await;
    // A request of each surface the rules look at, so every family has samples.
    let client = api.metrics_client("alerts").await;
    let proxy = http::Request::get(
        "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces",
    )
    .body(Vec::new())
    .expect("request");
    client.request_text(proxy).await.expect("proxy answers");
    // A rollout (Blocked: karmada-1 is External), so the rollout families have samples.
    let rollouts: kube::Api<kairship::crd::FleetRollout> = kube::Api::all(api.env.host.clone());
    let rollout: kairship::crd::FleetRollout = serde_json::from_value(serde_json::json!({
        "apiVersion": "kairship.io/v1alpha1", "kind": "FleetRollout",
        "metadata": {"name": "alerts"}, "spec": {"karmadaVersion": "v1.18.2"}
    }))
    .expect("a rollout");
    rollouts
        .create(&Default::default(), &rollout)
        .await
        .expect("rollout created");
    // A backup schedule, so the backup families have samples.
    let c = InstanceServiceClient::new(api.channel.clone());
    crate::backups::schedule(&c, "karmada-1", 60, 1).await;
    // A managed instance, so its control plane's families have samples.
    c.clone()
        .create_instance(kairship::proto::CreateInstanceRequest {
            instance: Some(crate::server::managed_instance("metered")),
        })
        .await
        .expect("managed instance created");
    let exported = crate::common::eventually(
        std::time::Duration::from_secs(60),
        "every family in the scrape",
        || async {
            let text = client
                .request_text(
                    http::Request::get("/metrics")
                        .body(Vec::new())
                        .expect("request"),
                )
                .await
                .ok()?;
            let e = exported(&text);
            let completed = text.lines().any(|l| {
                l.starts_with("kairship_backup_last_completed_timestamp_seconds{")
                    && !l.ends_with(" 0")
            });
            let rollout = e.contains_key("kairship_rollout_phase");
            let plane = e.contains_key("kairship_instance_control_plane_requests");
            (e.contains_key("kairship_instance_certificate_expiry_seconds")
                && completed
                && rollout
                && plane)
                .then_some(e)
        },
    )
    .await;

    let mut problems = Vec::new();
    let rules: Value =
        serde_saphyr::from_str(&chart_file("rules/kairship.rules.yaml")).expect("rules are YAML");
    let mut alerts = 0;
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            alerts += 1;
            let expr = rule["expr"].as_str().expect("expr");
            problems.extend(check(name, expr, &exported));
            if !matches!(
                rule["labels"]["severity"].as_str(),
                Some("warning" | "critical")
            ) {
                problems.push(format!("{name}: severity is not warning or critical"));
            }
            for a in ["summary", "description"] {
                if rule["annotations"][a].as_str().is_none_or(str::is_empty) {
                    problems.push(format!("{name}: no {a}"));
                }
            }
            if rule["for"].as_str().is_none() {
                problems.push(format!("{name}: fires on one evaluation (no `for`)"));
            }
        }
    }
    problems.extend(promtool::problems(&rules, &exported).await);
    let mut queries = 0;
    for name in DASHBOARDS {
        let file = format!("dashboards/{name}");
        let dashboard: Value = serde_json::from_str(&chart_file(&file)).expect("dashboard is JSON");
        for panel in dashboard["panels"].as_array().expect("panels") {
            let title = format!("{name}: {}", panel["title"].as_str().unwrap_or_default());
            for t in panel["targets"].as_array().into_iter().flatten() {
                queries += 1;
                // The one-instance dashboard's variable stands for an instance's name.
                let expr = t["expr"]
                    .as_str()
                    .expect("expr")
                    .replace("$instance", "karmada-1");
                problems.extend(check(&title, &expr, &exported));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        alerts >= 10 && queries >= 30,
        "{alerts} alerts, {queries} queries"
    );
    // The check itself catches a misspelt metric and label.
    assert_eq!(
        check("typo", "kairship_instance_phases == 1", &exported).len(),
        1
    );
    assert_eq!(
        check(
            "typo",
            r#"kairship_instance_phase{phas="Running"} == 1"#,
            &exported
        )
        .len(),
        1
    );
    api.stop().await;
}
