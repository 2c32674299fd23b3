//! Finding: Instance create/update/delete, actor restarts and the webhook's role changes
//! left no audit line, nor did refusals of them, and the proxy and gRPC wrote different
//! ones. After the attacks, the audit log holds one audit.k8s.io/v1 Event for each write
//! and refusal, whatever its surface; and nothing any attack tried to leak is anywhere.

use serde_json::Value;

use crate::{Demo, SECRET_VALUE};

fn find(events: &[Value], pred: impl Fn(&Value) -> bool) -> Option<&Value> {
    events.iter().find(|e| pred(e))
}

pub async fn every_write_and_refusal_left_an_event(demo: &Demo) {
    let events = demo.audit_events();
    assert!(
        events
            .iter()
            .all(|e| e["apiVersion"] == "audit.k8s.io/v1" && e["kind"] == "Event"),
        "every line is an audit.k8s.io/v1 Event"
    );
    let code = |e: &Value| e["responseStatus"]["code"].as_u64().unwrap_or(0);
    let is = |e: &Value, user: &str, verb: &str, resource: &str, name: &str| {
        e["user"]["username"] == user
            && e["verb"] == verb
            && e["objectRef"]["resource"] == resource
            && (name.is_empty() || e["objectRef"]["name"] == name)
    };
    type Check<'a> = Box<dyn Fn(&Value) -> bool + 'a>;
    let want: Vec<(&str, Check)> = vec![
        (
            "mallory's refused instance on another's Secret (403)",
            Box::new(|e| is(e, "mallory", "create", "instances", "stolen") && code(e) == 403),
        ),
        (
            "mallory's instance out of scope (400: a write, audited whatever its outcome)",
            Box::new(|e| is(e, "mallory", "create", "instances", "snoop") && code(e) == 400),
        ),
        (
            "the admin's instance create (200)",
            Box::new(|e| is(e, "admin", "create", "instances", "leaky") && code(e) == 200),
        ),
        (
            "the admin's instance delete (200)",
            Box::new(|e| is(e, "admin", "delete", "instances", "leaky") && code(e) == 200),
        ),
        (
            "a refused authentication (401)",
            Box::new(|e| e["user"]["username"] == "system:anonymous" && code(e) == 401),
        ),
        (
            "vera's watches over her bound (429)",
            Box::new(|e| {
                e["user"]["username"] == "vera"
                    && e["verb"] == "watch"
                    && code(e) == 429
                    && e["annotations"]["kairship.io/surface"] == "proxy"
            }),
        ),
        (
            "vera's refused read of the fleet's metrics (403)",
            Box::new(|e| is(e, "vera", "get", "metrics", "") && code(e) == 403),
        ),
    ];
    for (what, pred) in &want {
        let hit = find(&events, pred);
        assert!(hit.is_some(), "no audit event for {what}");
    }
    let stolen = find(&events, &want[0].1).expect("event");
    assert_eq!(
        stolen["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert_eq!(stolen["annotations"]["kairship.io/surface"], "grpc");
    assert!(stolen["auditID"].as_str().is_some_and(|id| id.len() == 36));
    println!(
        "audit: {} events, each write and refusal of the attacks among them",
        events.len()
    );
}

pub async fn nothing_leaked(demo: &Demo) {
    let output = std::fs::read_to_string(&demo.output).expect("demo output");
    assert!(
        !output.contains(SECRET_VALUE),
        "the demo's output quotes the Secret"
    );
    let audit = demo.audit_events();
    assert!(
        !serde_json::to_string(&audit)
            .expect("json")
            .contains(SECRET_VALUE),
        "the audit log quotes the Secret"
    );
    let instances: kube::Api<kairship::crd::Instance> = kube::Api::all(demo.host.clone());
    let all = instances
        .list(&Default::default())
        .await
        .expect("instances");
    assert!(
        !serde_json::to_string(&all.items)
            .expect("json")
            .contains(SECRET_VALUE),
        "an Instance quotes the Secret"
    );
}
