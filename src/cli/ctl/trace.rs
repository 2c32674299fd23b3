//! `kairship ctl trace INSTANCE KIND/NAME [-n NS]`: how a resource template got where it
//! is, step by step: policies, binding, Works, each cluster's state, events.

use std::time::Duration;

use serde_json::Value;

use super::{n, print, s, status, Conn, Output};
use crate::proto::{self, workload_service_client::WorkloadServiceClient};
use crate::Error;

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    instance: String,
    /// The template as KIND/NAME (`deploy/nginx`, `secret/db`, `Widget.example.com/w1`,
    /// `Widget.v1.example.com/w1`).
    template: String,
    /// The template's namespace (ignored for cluster-scoped kinds).
    #[arg(short, long, default_value = "default")]
    namespace: String,
}

/// `KIND[.VERSION][.GROUP]/NAME` as kubectl writes it, into kind, version, group and name.
fn split(template: &str) -> Result<(String, String, String, String), Error> {
    let bad = || {
        Error::Usage(format!(
            "{template:?}: give the template as KIND/NAME (deploy/nginx, secret/db, Widget.example.com/w1)"
        ))
    };
    let (kind, name) = template.split_once('/').ok_or_else(bad)?;
    if kind.is_empty() || name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    let (kind, rest) = kind.split_once('.').unwrap_or((kind, ""));
    // `Kind.v1.group` names a version; `Kind.group` a group alone.
    let (version, group) = match rest.split_once('.') {
        Some((v, g)) if v.starts_with('v') && v[1..].starts_with(|c: char| c.is_ascii_digit()) => {
            (v.to_string(), g.to_string())
        }
        _ => (String::new(), rest.to_string()),
    };
    Ok((kind.to_string(), version, group, name.to_string()))
}

pub(crate) async fn run(conn: &Conn, out: Output, a: &TraceArgs) -> Result<(), Error> {
    let (kind, version, group, name) = split(&a.template)?;
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    let r = c
        .trace_resource(conn.request_within(
            proto::TraceResourceRequest {
                instance: a.instance.clone(),
                group,
                version,
                kind,
                namespace: a.namespace.clone(),
                name,
            },
            Duration::from_secs(30),
        ))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.Trace", &r, rows)
}

/// The trace as sections of rows: template, policies, binding, clusters, events.
fn rows(j: &Value) -> Vec<Vec<String>> {
    let line = |t: String| vec![t];
    let list = |p: &str| {
        j.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let ns = s(j, "/namespace");
    let mut rows = vec![line(format!(
        "{} {}{} ({})",
        s(j, "/kind"),
        if ns.is_empty() {
            String::new()
        } else {
            format!("{ns}/")
        },
        s(j, "/name"),
        s(j, "/apiVersion")
    ))];
    let keys = list("/keys");
    if !keys.is_empty() {
        let keys: Vec<String> = keys
            .iter()
            .filter_map(|k| k.as_str().map(String::from))
            .collect();
        rows.push(line(format!("  keys: {}", keys.join(", "))));
    }
    rows.push(line(String::new()));
    rows.push(vec![
        "POLICY".into(),
        "PRIORITY".into(),
        "CLAIMS".into(),
        "WHY NOT".into(),
    ]);
    for p in list("/policies") {
        let claims = match (
            s(&p, "/reason").is_empty(),
            s(&p, "/policy/claimed") == "true",
        ) {
            (true, true) => "claimed",
            (true, false) => "would claim",
            _ => "no",
        };
        let pns = s(&p, "/policy/namespace");
        rows.push(vec![
            format!(
                "{} {}{}",
                s(&p, "/policy/kind"),
                if pns.is_empty() {
                    String::new()
                } else {
                    format!("{pns}/")
                },
                s(&p, "/policy/name")
            ),
            n(&p, "/priority"),
            claims.into(),
            s(&p, "/reason"),
        ]);
    }
    for o in list("/overrides") {
        rows.push(line(format!(
            "  overridden by {} {}",
            s(&o, "/kind"),
            s(&o, "/name")
        )));
    }
    rows.push(line(String::new()));
    match j.get("binding") {
        None => rows.push(line("no binding: no policy has claimed it yet".into())),
        Some(b) => {
            rows.push(line(format!("binding {}", s(b, "/bindingName"))));
            for c in b["conditions"].as_array().into_iter().flatten() {
                rows.push(line(format!(
                    "  {}={} {} {}",
                    s(c, "/type"),
                    s(c, "/status"),
                    s(c, "/reason"),
                    s(c, "/message")
                )));
            }
            rows.push(vec![
                "CLUSTER".into(),
                "REPLICAS".into(),
                "APPLIED".into(),
                "HEALTH".into(),
                "WORK".into(),
            ]);
            let works = list("/works");
            for t in b["clusters"].as_array().into_iter().flatten() {
                let cluster = s(t, "/name");
                let agg = b["aggregatedStatus"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|a| s(a, "/clusterName") == cluster);
                let work = works.iter().find(|w| s(w, "/cluster") == cluster);
                rows.push(vec![
                    cluster.clone(),
                    n(t, "/replicas"),
                    agg.map(|a| (s(a, "/applied") == "true").to_string())
                        .unwrap_or_else(|| "-".into()),
                    agg.map(|a| s(a, "/health")).unwrap_or_else(|| "-".into()),
                    work.map(|w| format!("{}/{}", s(w, "/namespace"), s(w, "/name")))
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
        }
    }
    let events = list("/events");
    if !events.is_empty() {
        rows.push(line(String::new()));
        rows.push(vec![
            "LAST SEEN".into(),
            "CLUSTER".into(),
            "OBJECT".into(),
            "REASON".into(),
            "MESSAGE".into(),
        ]);
        for e in events {
            rows.push(vec![
                s(&e, "/time"),
                s(&e, "/cluster"),
                format!("{}/{}", s(&e, "/objectKind"), s(&e, "/objectName")),
                s(&e, "/reason"),
                s(&e, "/message"),
            ]);
        }
    }
    for u in list("/unavailable") {
        rows.push(line(format!(
            "not shown: {}",
            u.as_str().unwrap_or_default()
        )));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_as_kubectl_writes_them() {
        let t = |x: &str| split(x).map_err(|e| e.to_string());
        assert_eq!(
            t("deploy/nginx"),
            Ok(("deploy".into(), "".into(), "".into(), "nginx".into()))
        );
        assert_eq!(
            t("Widget.example.com/w1"),
            Ok((
                "Widget".into(),
                "".into(),
                "example.com".into(),
                "w1".into()
            ))
        );
        assert_eq!(
            t("Widget.v1beta1.example.com/w1"),
            Ok((
                "Widget".into(),
                "v1beta1".into(),
                "example.com".into(),
                "w1".into()
            ))
        );
        for bad in ["nginx", "/nginx", "deploy/", "deploy/a/b"] {
            assert!(t(bad).expect_err(bad).contains("KIND/NAME"), "{bad}");
        }
    }
}
