//! `kairship ctl instances usage`: what each instance is used for and what it costs,
//! idle first (never requested, then the longest since its last request), so the
//! instances nobody uses are at the top.

use serde_json::Value;

use super::{n, print, s, Conn, Output};
use crate::proto;
use crate::Error;

pub(super) async fn list(conn: &Conn, out: Output) -> Result<(), Error> {
    // Every page: idle first means across the whole fleet.
    let mut r = super::every_instance(conn).await?;
    // RFC 3339 in UTC sorts as time does; "" (never) first.
    r.instances.sort_by(|a, b| {
        let last = |i: &proto::Instance| {
            let t = i.status.as_ref().map(|s| s.last_request_time.clone());
            (
                t.unwrap_or_default(),
                i.metadata.as_ref().map(|m| m.name.clone()),
            )
        };
        last(a).cmp(&last(b))
    });
    let now = jiff::Timestamp::now();
    print(out, "kairship.v1alpha1.ListInstancesResponse", &r, |j| {
        rows(
            j["instances"].as_array().map(Vec::as_slice).unwrap_or(&[]),
            now,
        )
    })
}

fn rows(items: &[Value], now: jiff::Timestamp) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "NAME",
        "PHASE",
        "LAST REQUEST",
        "CONTROL PLANE PODS",
        "CPU REQUESTS",
        "MEMORY REQUESTS",
        "MEMBER CPU",
        "MEMBER MEMORY",
        "HOURS ASLEEP",
        "CPU-HOURS SAVED",
    ]
    .map(String::from)
    .to_vec()];
    for i in items {
        let control_plane = i.pointer("/status/controlPlane").is_some();
        let or_dash = |v: String| if control_plane { v } else { "-".into() };
        rows.push(vec![
            s(i, "/metadata/name"),
            s(i, "/status/phase"),
            ago(&s(i, "/status/lastRequestTime"), now),
            or_dash(n(i, "/status/controlPlane/pods")),
            or_dash(s(i, "/status/controlPlane/cpuRequests")),
            or_dash(s(i, "/status/controlPlane/memoryRequests")),
            allocated(i, "cpu"),
            allocated(i, "memory"),
            or_dash(format!("{:.1}", asleep_hours(i, now))),
            or_dash(saved(i, now)),
        ]);
    }
    rows
}

/// Hours hibernated in all: past sleeps (counted at each wake) and the current one.
fn asleep_hours(i: &Value, now: jiff::Timestamp) -> f64 {
    let past = n(i, "/status/hibernation/hibernatedSeconds")
        .parse::<f64>()
        .unwrap_or(0.0);
    let current = match s(i, "/status/hibernation/state").as_str() {
        "Hibernated" => s(i, "/status/hibernation/since")
            .parse::<jiff::Timestamp>()
            .map_or(0, |t| (now.as_second() - t.as_second()).max(0)),
        _ => 0,
    };
    (past + current as f64) / 3600.0
}

/// What its control plane would have asked for while it slept: hours asleep times its
/// CPU requests.
fn saved(i: &Value, now: jiff::Timestamp) -> String {
    let cores = crate::quantity::parse(&s(i, "/status/controlPlane/cpuRequests"))
        .map_or(0.0, |m| m.0 as f64 / 1000.0);
    format!("{:.1}", asleep_hours(i, now) * cores)
}

/// `allocated/allocatable` of the members, or `-` before the first stats.
fn allocated(i: &Value, resource: &str) -> String {
    let of = |state: &str| s(i, &format!("/status/stats/{resource}{state}"));
    match (of("Allocated"), of("Allocatable")) {
        (a, b) if a.is_empty() && b.is_empty() => "-".into(),
        (a, b) => format!("{a}/{b}"),
    }
}

/// How long ago `at` (RFC 3339) was, as kubectl prints ages; `never` when empty.
fn ago(at: &str, now: jiff::Timestamp) -> String {
    if at.is_empty() {
        return "never".into();
    }
    let Ok(t) = at.parse::<jiff::Timestamp>() else {
        return at.to_string();
    };
    let secs = (now.as_second() - t.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s ago"),
        s if s < 2 * 3600 => format!("{}m ago", s / 60),
        s if s < 2 * 86_400 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let now: jiff::Timestamp = "2026-11-29T12:00:00Z".parse().expect("time");
        for (at, want) in [
            ("", "never"),
            ("2026-11-29T11:59:30Z", "30s ago"),
            ("2026-11-29T11:00:00Z", "60m ago"),
            ("2026-11-29T02:00:00Z", "10h ago"),
            ("2026-11-20T12:00:00Z", "9d ago"),
            ("not a time", "not a time"),
        ] {
            assert_eq!(ago(at, now), want, "{at}");
        }
    }

    #[test]
    fn a_row_says_what_is_not_known_yet() {
        let now = jiff::Timestamp::now();
        let external = json!({"metadata": {"name": "ext"}, "status": {"phase": "Running"}});
        let managed = json!({"metadata": {"name": "m"}, "status": {"phase": "Running",
            "controlPlane": {"pods": 7, "cpuRequests": "950m", "memoryRequests": "1792Mi"},
            "hibernation": {"state": "Awake", "hibernatedSeconds": "7200"},
            "stats": {"cpuAllocated": "2", "cpuAllocatable": "16",
                "memoryAllocated": "4Gi", "memoryAllocatable": "64Gi"}}});
        let r = rows(&[external, managed], now);
        assert_eq!(r[1][2..], ["never", "-", "-", "-", "-", "-", "-", "-"]);
        assert_eq!(
            r[2][3..],
            ["7", "950m", "1792Mi", "2/16", "4Gi/64Gi", "2.0", "1.9"]
        );
    }
}
