//! Differential conformance: the same raw requests to the simulator and to a real
//! kube-apiserver, answers compared. Each difference is fixed in the simulator or listed in
//! the README's known differences.

use http_body_util::BodyExt;
use serde_json::Value;

use crate::common::Sim;

mod dry_runs;
mod karmada;
mod openapi;
mod writes;

/// Status code, `Warning` headers and body of a raw request.
async fn request(c: &kube::Client, req: http::Request<Vec<u8>>) -> (u16, Vec<String>, String) {
    let resp = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        c.send(req.map(kube::client::Body::from)),
    )
    .await
    .expect("answers in time")
    .expect("sent");
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let body = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        resp.into_body().collect(),
    )
    .await
    .expect("body in time")
    .expect("body")
    .to_bytes();
    (code, warnings, String::from_utf8_lossy(&body).into_owned())
}

/// Status code and body of a raw GET.
async fn get(c: &kube::Client, uri: &str) -> (u16, String) {
    let req = http::Request::get(uri).body(Vec::new()).expect("request");
    let (code, _, body) = request(c, req).await;
    (code, body)
}

/// The created object of a POST (a Status on failure).
async fn post(c: &kube::Client, uri: &str, body: &Value) -> Value {
    let req = http::Request::post(uri)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .expect("request");
    let text = tokio::time::timeout(std::time::Duration::from_secs(20), c.request_text(req))
        .await
        .expect("answers in time");
    match text {
        Ok(t) => serde_json::from_str(&t).unwrap_or_default(),
        Err(e) => serde_json::json!({"error": e.to_string()}),
    }
}

/// A created Service's spec and status with allocated values replaced by their shape.
fn service_shape(svc: &Value) -> Value {
    let mut spec = svc["spec"].clone();
    let ip_shape = |v: &Value| match v.as_str() {
        Some("None") => Value::from("None"),
        Some(ip) if ip.parse::<std::net::Ipv4Addr>().is_ok() => Value::from("<IPv4>"),
        _ => v.clone(),
    };
    if let Some(ip) = spec.get("clusterIP").cloned() {
        spec["clusterIP"] = ip_shape(&ip);
    }
    if let Some(ips) = spec.get_mut("clusterIPs").and_then(Value::as_array_mut) {
        for ip in ips {
            *ip = ip_shape(ip);
        }
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if let Some(n) = p.get("nodePort").and_then(Value::as_u64) {
                p["nodePort"] = Value::from(if (30000..=32767).contains(&n) {
                    "<30000-32767>".to_string()
                } else {
                    n.to_string()
                });
            }
        }
    }
    serde_json::json!({"spec": spec, "status": svc["status"], "error": svc["error"]})
}

/// What kind of answer a body is: a watch stream, a list, a Status (with its reason).
fn shape(code: u16, body: &str) -> String {
    let first = body.lines().next().unwrap_or_default();
    // A list always has a body; a watch may close on its timeout before any event.
    if code == 200 && first.is_empty() {
        return format!("{code} watch");
    }
    let v: Value = serde_json::from_str(first).unwrap_or(Value::Null);
    if v.get("type").is_some() && v.get("object").is_some() {
        return format!("{code} watch");
    }
    match v["kind"].as_str() {
        Some("Status") => format!("{code} Status {}", v["reason"].as_str().unwrap_or_default()),
        Some(k) if k.ends_with("List") => format!("{code} list"),
        Some(k) => format!("{code} {k}"),
        None => format!("{code} ?"),
    }
}

/// The top-level keys of a JSON object, in the order they were written.
fn key_order(body: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut de = serde_json::Deserializer::from_str(body);
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> serde::de::Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            while let Some(k) = m.next_key::<String>()? {
                self.0.push(k);
                m.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let _ = serde::Deserializer::deserialize_map(&mut de, Keys(&mut keys));
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_answers_as_a_real_kube_apiserver() {
    if !crate::binaries_present() {
        kairship_test_support::missing_prerequisite(
            "real",
            "the real-fleet binaries are missing: run scripts/real-fleet/build.sh",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = kairship_realfleet::FleetConfig::new(dir.path().join("real"), 0, 0);
    let karmada_crds = config.crds.clone();
    let fleet = kairship_realfleet::RealFleet::start(config, &|_| {})
        .await
        .expect("real host starts");
    let real = fleet.host.client().await.expect("client");
    // One simulated instance, for Karmada's kinds (compared last: they add groups).
    let sim = Sim::start(1).await;
    let simulated = sim.client("host").await;

    let base = "/api/v1/namespaces/default/configmaps";
    let mut differences = Vec::new();
    // Boolean query parameters, as clients send them (a Python client sends `True`).
    for q in [
        "watch=true",
        "watch=True",
        "watch=TRUE",
        "watch=1",
        "watch=t",
        "watch=yes",
        "watch=false",
        "watch=False",
        "watch=0",
        "watch=",
    ] {
        let uri = format!("{base}?{q}&timeoutSeconds=1");
        let (a, b) = (get(&real, &uri).await, get(&simulated, &uri).await);
        let (ra, sb) = (shape(a.0, &a.1), shape(b.0, &b.1));
        if ra != sb {
            differences.push(format!("?{q}: real {ra}, simulator {sb}"));
        }
    }
    // Malformed parameters: same code and reason.
    for q in [
        "limit=abc",
        "labelSelector=a%20in%20(",
        "fieldSelector=metadata.nam",
        "resourceVersion=abc",
        "timeoutSeconds=x&watch=1",
    ] {
        let uri = format!("{base}?{q}");
        let (a, b) = (get(&real, &uri).await, get(&simulated, &uri).await);
        let (ra, sb) = (shape(a.0, &a.1), shape(b.0, &b.1));
        if ra != sb {
            differences.push(format!(
                "?{q}: real {ra} ({}), simulator {sb} ({})",
                a.1.trim(),
                b.1.trim()
            ));
        }
    }
    // Error bodies: the same fields in the same order.
    let missing = format!("{base}/no-such-configmap");
    let (a, b) = (get(&real, &missing).await, get(&simulated, &missing).await);
    assert_eq!(a.0, 404, "{}", a.1);
    if key_order(&a.1) != key_order(&b.1) {
        differences.push(format!(
            "Status field order: real {:?}, simulator {:?}",
            key_order(&a.1),
            key_order(&b.1)
        ));
    }
    let (ma, mb): (Value, Value) = (
        serde_json::from_str(&a.1).unwrap_or_default(),
        serde_json::from_str(&b.1).unwrap_or_default(),
    );
    if ma["message"] != mb["message"] || ma["details"] != mb["details"] {
        differences.push(format!(
            "404 Status: real {}, simulator {}",
            a.1.trim(),
            b.1.trim()
        ));
    }
    // Kinds every kube-apiserver serves, kubelet or not: lists, not 404.
    for uri in [
        "/api/v1/nodes",
        "/api/v1/pods",
        "/api/v1/namespaces/default/replicationcontrollers",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "/apis/apps/v1/replicasets",
    ] {
        let (a, b) = (get(&real, uri).await, get(&simulated, uri).await);
        let (ra, sb) = (shape(a.0, &a.1), shape(b.0, &b.1));
        if ra != sb {
            differences.push(format!("{uri}: real {ra}, simulator {sb}"));
        }
    }
    // Which core kinds are in the `all` category (`kubectl get all`).
    let categories = |body: &str| -> Vec<(String, Value)> {
        let v: Value = serde_json::from_str(body).unwrap_or_default();
        let mut out: Vec<(String, Value)> = v["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| {
                [
                    "pods",
                    "configmaps",
                    "secrets",
                    "nodes",
                    "services",
                    "replicationcontrollers",
                ]
                .contains(&r["name"].as_str().unwrap_or_default())
            })
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or_default().to_string(),
                    r["categories"].clone(),
                )
            })
            .collect();
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out
    };
    let (a, b) = (
        get(&real, "/api/v1").await,
        get(&simulated, "/api/v1").await,
    );
    if categories(&a.1) != categories(&b.1) {
        differences.push(format!(
            "/api/v1 categories: real {:?}, simulator {:?}",
            categories(&a.1),
            categories(&b.1)
        ));
    }
    // What kube-apiserver defaults on a Service, compared field by field (the addresses
    // it allocates compared by shape: one IPv4 of the service range, a port in range).
    for (name, spec) in [
        (
            "plain",
            serde_json::json!({"ports": [{"port": 80}], "selector": {"app": "web"}}),
        ),
        (
            "nodeport",
            serde_json::json!({"type": "NodePort", "ports": [{"port": 443, "targetPort": "https", "name": "https"}]}),
        ),
        (
            "headless",
            serde_json::json!({"clusterIP": "None", "ports": [{"port": 5432}]}),
        ),
        (
            "headless-selected",
            serde_json::json!({"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]}),
        ),
        (
            "balancer",
            serde_json::json!({"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "UDP"}]}),
        ),
    ] {
        let svc = serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec});
        let (a, b) = (
            post(&real, "/api/v1/namespaces/default/services", &svc).await,
            post(&simulated, "/api/v1/namespaces/default/services", &svc).await,
        );
        let (a, b) = (service_shape(&a), service_shape(&b));
        if a != b {
            differences.push(format!("Service {name}: real {a}, simulator {b}"));
        }
    }
    differences.extend(writes_compared(&real, &simulated).await);
    differences.extend(
        openapi::compared(
            &real,
            &simulated,
            &fleet.host.kubeconfig,
            &sim.kubeconfig("host"),
            dir.path(),
        )
        .await,
    );
    differences.extend(
        dry_runs::compared(
            &real,
            &simulated,
            &fleet.host.kubeconfig,
            &sim.kubeconfig("host"),
            dir.path(),
        )
        .await,
    );
    differences.extend(karmada::compared(
        &karmada_crds,
        &fleet.host.kubeconfig,
        &sim.kubeconfig("karmada-1"),
        dir.path(),
    ));
    assert!(
        differences.is_empty(),
        "the simulator differs from kube-apiserver:\n{}",
        differences.join("\n")
    );
}

/// The write sequences of [`writes::steps`] on both servers, answer by answer, after the
/// Widget CRD they use is served by both.
async fn writes_compared(real: &kube::Client, sim: &kube::Client) -> Vec<String> {
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for c in [real, sim] {
        let created = post(c, crds, &writes::widget_crd()).await;
        assert_eq!(created["kind"], "CustomResourceDefinition", "{created}");
    }
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    kairship_test_support::eventually(
        std::time::Duration::from_secs(30),
        "kube-apiserver to serve the Widget CRD",
        || async { (get(real, widgets).await.0 == 200).then_some(()) },
    )
    .await;
    let mut differences = Vec::new();
    for (i, s) in writes::steps().iter().enumerate() {
        let (a, b) = (writes::send(real, s).await, writes::send(sim, s).await);
        // The sequences end by reading what they built: on the real server that must
        // exist, or the comparison above compared two failures.
        if s.0 == "GET" {
            assert_eq!(a.0, 200, "kube-apiserver: GET {} {}", s.1, a.1);
        }
        let (a, b) = (
            (a.0, writes::normalized(&a.1), a.2),
            (b.0, writes::normalized(&b.1), b.2),
        );
        if a != b {
            differences.push(format!(
                "step {i} {} {}: real {} {:?} {}, simulator {} {:?} {}",
                s.0, s.1, a.0, a.2, a.1, b.0, b.2, b.1
            ));
        }
    }
    differences
}
