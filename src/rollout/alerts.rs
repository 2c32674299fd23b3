//! Alerts as a rollout's halt signal: the leader reads what Prometheus says is firing
//! (`GET <--alerts-url>/api/v1/alerts`) once per pass, and each rollout keeps the alerts
//! its `haltOnAlerts` names. An alert labelled `karmada_instance` (Kairship's per-instance
//! alerts, or a team's own) speaks of that instance: it fails the instance if it fires
//! while the instance soaks after its change. An alert naming no instance and no rollout
//! (API errors, a relisting cache) speaks of the fleet: nothing starts or finishes while it
//! fires. Alerts that cannot be read hold the rollout the same way, since going on blind
//! would defeat the point.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// One alert Prometheus reports firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    pub name: String,
    /// Its `karmada_instance` label.
    pub instance: Option<String>,
    /// Whether it speaks of a rollout (its `rollout` label): another rollout's halt is
    /// not this one's signal.
    pub about_rollout: bool,
    /// Its `summary` annotation, or its labels when it has none.
    pub summary: String,
}

/// What Prometheus said at the last read: the alerts firing, or why they could not be read.
pub type Read = Result<Vec<Firing>, String>;

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(default)]
    alerts: Vec<Alert>,
}

#[derive(Deserialize)]
struct Alert {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    state: String,
}

/// The firing alerts in an answer of Prometheus's `/api/v1/alerts` (pending ones are not
/// firing yet: their `for` has not passed).
pub fn parse(body: &[u8]) -> Read {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| format!("not an answer of /api/v1/alerts: {e}"))?;
    if answer.status != "success" {
        return Err(format!(
            "Prometheus answered {}: {}",
            answer.status, answer.error
        ));
    }
    Ok(answer
        .data
        .map(|d| d.alerts)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.state == "firing")
        .filter_map(|a| {
            let name = a.labels.get("alertname")?.clone();
            let summary = a.annotations.get("summary").cloned().unwrap_or_else(|| {
                a.labels
                    .iter()
                    .filter(|(k, _)| k.as_str() != "alertname")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            Some(Firing {
                name,
                instance: a.labels.get("karmada_instance").cloned(),
                about_rollout: a.labels.contains_key("rollout"),
                summary,
            })
        })
        .collect())
}

/// Whether `name` is one of `patterns` (a name, or a prefix ending in `*`).
pub fn named(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => p == name,
    })
}

/// Whether a rollout's reason is a hold of [`signals`] (it lifts by itself), not a halt.
pub fn is_hold(reason: &str) -> bool {
    reason.starts_with("held ")
}

/// What the alerts mean for one rollout halting on `patterns`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    /// Per instance, the first alert naming it: it fails if it soaks.
    pub instances: BTreeMap<String, String>,
    /// Why nothing may start or finish: a fleet-wide alert, or alerts that cannot be read.
    pub hold: Option<String>,
}

/// The signals of `read` (`None`: Kairship reads no alerts) for a rollout halting on
/// `patterns` (empty: it halts on none).
pub fn signals(read: Option<&Read>, patterns: &[String]) -> Signals {
    let mut out = Signals::default();
    let Some(read) = read.filter(|_| !patterns.is_empty()) else {
        return out;
    };
    let firing = match read {
        Ok(firing) => firing,
        Err(why) => {
            out.hold = Some(format!(
                "held until the alerts it halts on can be read: {why}"
            ));
            return out;
        }
    };
    for a in firing.iter().filter(|a| named(patterns, &a.name)) {
        let said = format!("alert {} is firing: {}", a.name, a.summary);
        match &a.instance {
            Some(i) => {
                out.instances.entry(i.clone()).or_insert(said);
            }
            None if a.about_rollout => {}
            None => {
                out.hold.get_or_insert_with(|| {
                    format!("held while {said} (it goes on once the alert resolves)")
                });
            }
        }
    }
    out
}

/// Reads Prometheus's firing alerts at `base` (`http(s)://host:port`, Prometheus's own
/// prefix included when it has one).
pub struct Reader {
    base: String,
    uri: http::Uri,
    client: crate::outbound::Client,
    timeout: Duration,
}

/// At most this much of an answer is read (a fleet's alerts fit many times over).
const MAX_ANSWER: usize = 8 << 20;

impl Reader {
    /// A reader of `base`; an error names what is wrong with it.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, String> {
        let trimmed = base.trim_end_matches('/');
        let uri: http::Uri = format!("{trimmed}/api/v1/alerts")
            .parse()
            .map_err(|e| format!("--alerts-url {base:?} is not a URL: {e}"))?;
        // Credentials in the address would show in every error naming it (rollout
        // reasons, logs).
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(
                "--alerts-url must not carry credentials (user:password@): they would show in rollouts' reasons"
                    .into(),
            );
        }
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(format!(
                "--alerts-url {base:?} must be http:// or https:// with a host (Prometheus's address)"
            ));
        }
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(crate::outbound::native_roots());
        let client = crate::outbound::client(roots, false).map_err(|e| e.to_string())?;
        Ok(Self {
            base: trimmed.to_string(),
            uri,
            client,
            timeout,
        })
    }

    /// The firing alerts, or why they could not be read.
    pub async fn read(&self) -> Read {
        use http_body_util::BodyExt;
        let get = async {
            let resp = self
                .client
                .get(self.uri.clone())
                .await
                .map_err(|e| format!("{}: {e}", self.base))?;
            let status = resp.status();
            let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| format!("{}: reading the answer: {e}", self.base))?
                .to_bytes();
            if !status.is_success() {
                let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
                return Err(format!("{} answered HTTP {status}: {text}", self.base));
            }
            parse(&body).map_err(|e| format!("{}: {e}", self.base))
        };
        match tokio::time::timeout(self.timeout, get).await {
            Ok(read) => read,
            Err(_) => Err(format!(
                "{}: no answer within {:?}",
                self.base, self.timeout
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"status":"success","data":{"alerts":[
      {"labels":{"alertname":"KairshipInstanceDegraded","karmada_instance":"a","severity":"warning"},
       "annotations":{"summary":"Karmada instance a is Degraded"},"state":"firing","activeAt":"2026-11-28T10:00:00Z","value":"1e+00"},
      {"labels":{"alertname":"KairshipInstanceUnreachable","karmada_instance":"b"},
       "annotations":{},"state":"pending","activeAt":"2026-11-28T10:00:00Z","value":"1e+00"},
      {"labels":{"alertname":"KairshipRolloutHalted","rollout":"older"},
       "annotations":{"summary":"Fleet rollout older halted"},"state":"firing"},
      {"labels":{"alertname":"KairshipAPIErrors","severity":"warning"},
       "annotations":{},"state":"firing"}
    ]}}"#;

    fn defaults() -> Vec<String> {
        crate::crd::DEFAULT_HALT_ON
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn firing_alerts_are_read_and_pending_ones_are_not() {
        let firing = parse(ANSWER.as_bytes()).expect("parses");
        let names: Vec<&str> = firing.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "KairshipInstanceDegraded",
                "KairshipRolloutHalted",
                "KairshipAPIErrors"
            ]
        );
        assert_eq!(firing[0].instance.as_deref(), Some("a"));
        assert_eq!(firing[0].summary, "Karmada instance a is Degraded");
        // No summary: the labels say what it is about.
        assert_eq!(firing[2].summary, "severity=warning");
        let refused = parse(br#"{"status":"error","errorType":"bad_data","error":"boom"}"#);
        assert_eq!(refused, Err("Prometheus answered error: boom".into()));
        assert!(parse(b"<html>").is_err_and(|e| e.contains("/api/v1/alerts")));
    }

    #[test]
    fn instance_alerts_fail_their_instance_and_fleet_alerts_hold() {
        let firing = parse(ANSWER.as_bytes()).expect("parses");
        let s = signals(Some(&Ok(firing.clone())), &defaults());
        assert_eq!(
            s.instances.get("a").map(String::as_str),
            Some("alert KairshipInstanceDegraded is firing: Karmada instance a is Degraded")
        );
        assert!(
            !s.instances.contains_key("b"),
            "a pending alert does not count"
        );
        let hold = s.hold.expect("the API's errors hold every rollout");
        assert!(is_hold(&hold));
        assert!(hold.contains("KairshipAPIErrors"), "{hold}");
        // Another rollout's halt is not a signal, even when named.
        let only_rollouts = signals(Some(&Ok(firing.clone())), &["KairshipRollout*".into()]);
        assert_eq!(only_rollouts, Signals::default());
        // Halting on none, or reading none: nothing.
        assert_eq!(signals(Some(&Ok(firing)), &[]), Signals::default());
        assert_eq!(signals(None, &defaults()), Signals::default());
        // Unreadable: held, saying why.
        let unread = signals(
            Some(&Err("http://p:9090: connection refused".into())),
            &defaults(),
        );
        assert!(unread
            .hold
            .is_some_and(|h| h.contains("connection refused")));
    }

    #[test]
    fn patterns_are_names_or_prefixes() {
        let p = vec!["KairshipInstance*".to_string(), "TeamAlert".to_string()];
        assert!(named(&p, "KairshipInstanceDegraded"));
        assert!(named(&p, "TeamAlert"));
        assert!(!named(&p, "TeamAlertX"));
        assert!(!named(&p, "KairshipAPIErrors"));
    }

    #[test]
    fn a_reader_refuses_what_is_not_an_http_address() {
        let t = Duration::from_secs(1);
        assert!(Reader::new("prometheus:9090", t).is_err());
        assert!(Reader::new("ftp://p:9090", t).is_err());
        let with_secret = Reader::new("http://ops:s3cret@prometheus:9090", t).err();
        assert!(with_secret.is_some_and(|e| !e.contains("s3cret") && e.contains("credentials")));
        assert!(Reader::new("http://prometheus.monitoring:9090/", t).is_ok());
    }
}
