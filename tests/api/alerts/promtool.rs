//! `promtool test rules` (Prometheus's own rule tester, built by scripts/real-fleet) on
//! `kairship.rules.test.yaml`: every alert fires in one case and stays quiet in another,
//! with its annotations rendered as written. The cases' input series are held against a
//! live scrape, so they are series Kairship really exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use promql_parser::parser::{self, Expr};
use serde_json::Value;

/// Labels Prometheus adds to a scraped series (target labels), not Kairship's own.
const TARGET_LABELS: [&str; 4] = ["pod", "job", "instance", "namespace"];

fn test_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/api/alerts/kairship.rules.test.yaml")
}

/// Every problem with the rule tests: a series Kairship does not export, an alert without
/// a firing or a quiet case, and whatever promtool reports.
pub(super) async fn problems(
    rules: &Value,
    exported: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let text = std::fs::read_to_string(test_file()).expect("the rule tests");
    let tests: Value = serde_saphyr::from_str(&text).expect("the rule tests are YAML");
    let mut problems = Vec::new();
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for group in tests["tests"].as_array().expect("tests") {
        let name = group["name"].as_str().unwrap_or_default();
        for s in group["input_series"].as_array().into_iter().flatten() {
            let series = s["series"].as_str().expect("series");
            problems.extend(series_problems(name, series, exported));
        }
        for t in group["alert_rule_test"].as_array().into_iter().flatten() {
            let alert = t["alertname"].as_str().expect("alertname").to_string();
            match t["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()) {
                true => firing.insert(alert),
                false => quiet.insert(alert),
            };
        }
    }
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let alert = rule["alert"].as_str().expect("alert");
            if !firing.contains(alert) {
                problems.push(format!("{alert}: no rule test where it fires"));
            }
            if !quiet.contains(alert) {
                problems.push(format!("{alert}: no rule test where it stays quiet"));
            }
        }
    }
    let promtool = kairship_realfleet::default_bin_dir().join("promtool");
    if !promtool.exists() {
        kairship_test_support::missing_prerequisite(
            "real",
            &format!(
                "{} is not built: run scripts/real-fleet/build.sh",
                promtool.display()
            ),
        );
        return problems;
    }
    let rules_file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/chart/kairship/rules/kairship.rules.yaml");
    let dir = test_file()
        .parent()
        .map(Path::to_path_buf)
        .expect("a folder");
    problems.extend(promtool_run(&promtool, &dir, &["check", "rules"], &rules_file).await);
    problems.extend(promtool_run(&promtool, &dir, &["test", "rules"], &test_file()).await);
    problems
}

fn series_problems(
    group: &str,
    series: &str,
    exported: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let Ok(Expr::VectorSelector(v)) = parser::parse(series) else {
        return vec![format!("{group}: {series} is not a series")];
    };
    let name = v.name.clone().unwrap_or_default();
    let Some(known) = exported.get(&name) else {
        return vec![format!("{group}: Kairship exports no {name:?}")];
    };
    v.matchers
        .matchers
        .iter()
        .map(|m| m.name.as_str())
        .filter(|l| !TARGET_LABELS.contains(l) && !known.contains(*l))
        .map(|l| format!("{group}: {name} has no label {l:?} (it has {known:?})"))
        .collect()
}

async fn promtool_run(promtool: &Path, dir: &Path, args: &[&str], file: &Path) -> Vec<String> {
    let run = tokio::process::Command::new(promtool)
        .args(args)
        .arg(file)
        .current_dir(dir)
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(Ok(out)) if out.status.success() => Vec::new(),
        Ok(Ok(out)) => vec![format!(
            "promtool {}: {}\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )],
        Ok(Err(e)) => vec![format!("promtool {}: {e}", args.join(" "))],
        Err(_) => vec![format!("promtool {}: no answer in 120 s", args.join(" "))],
    }
}
