//! Writes compared: field validation (unknown and duplicate fields, each validation
//! mode), the defaults kube-apiserver fills on decoding, and server-side apply with its
//! `managedFields`, conflicts, forcing and removal of dropped fields, on a built-in kind
//! and on a custom resource with keyed lists, sets and maps.

use serde_json::{json, Value};

/// One raw request: method, path and query, body, content type.
pub struct Step(
    pub &'static str,
    pub String,
    pub Option<String>,
    pub &'static str,
);

const JSON: &str = "application/json";
const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// Status code, body and `Warning` headers of a request.
pub async fn send(c: &kube::Client, s: &Step) -> (u16, Value, Vec<String>) {
    let req = http::Request::builder()
        .method(s.0)
        .uri(&s.1)
        .header("content-type", s.3)
        .header("user-agent", "differential/1.0")
        .body(s.2.clone().unwrap_or_default().into_bytes())
        .expect("request");
    let (code, warnings, body) = super::request(c, req).await;
    (
        code,
        serde_json::from_str(&body).unwrap_or(Value::Null),
        warnings,
    )
}

/// An answer without what differs by nature: uids, versions, times, allocated addresses,
/// and (in a refused patch's message) the patched object's own serialization.
pub fn normalized(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            m.remove(k);
        }
        for e in m
            .get_mut("managedFields")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(e) = e.as_object_mut() {
                e.remove("time");
            }
        }
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        for k in ["clusterIP", "clusterIPs"] {
            if spec.contains_key(k) {
                spec.insert(k.into(), "<allocated>".into());
            }
        }
    }
    let patched = |s: &str| -> String {
        let end = s
            .rfind("\": strict decoding error")
            .or_else(|| s.rfind("\": json: cannot unmarshal"));
        match (s.find("Invalid value: \"{"), end) {
            (Some(a), Some(b)) if a < b => format!("{}<patched object>{}", &s[..a + 15], &s[b..]),
            _ => s.to_string(),
        }
    };
    if v["kind"] == "Status" {
        if let Some(m) = v["message"].as_str().map(patched) {
            v["message"] = m.into();
        }
        for c in v
            .pointer_mut("/details/causes")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(m) = c["message"].as_str().map(patched) {
                c["message"] = m.into();
            }
        }
    }
    v
}

fn step(method: &'static str, uri: &str, body: Option<Value>, ct: &'static str) -> Step {
    Step(method, uri.to_string(), body.map(|b| b.to_string()), ct)
}

fn raw(method: &'static str, uri: &str, body: &str, ct: &'static str) -> Step {
    Step(method, uri.to_string(), Some(body.to_string()), ct)
}

/// The Widget CRD: a schema with a keyed list, a set, a map, a preserved object and a
/// status subresource.
pub fn widget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "description": "A widget.", "properties": {
                    "spec": {"type": "object", "description": "What the widget is.", "required": ["size"], "properties": {
                        "size": {"type": "integer", "description": "How big."},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "count": {"type": "integer"}}}},
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}})
}

/// The requests compared, in order (each runs on both servers before the next).
pub fn steps() -> Vec<Step> {
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |data: Value, labels: Option<Value>| {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data});
        if let Some(l) = labels {
            o["metadata"]["labels"] = l;
        }
        Some(o)
    };
    let ssa = |q: &str| format!("{cms}/ssa?{q}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = |spec: Value| {
        Some(
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}),
        )
    };
    let w = |q: &str| format!("{widgets}/w?{q}");
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}]}}}});
    vec![
        // Validation: each mode, unknown and duplicate fields, a bad mode, nested paths.
        raw(
            "POST",
            &format!("{cms}?fieldValidation=Strict"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v","foo":1},"data":{"a":"1"},"spec":{"x":1},"zz":2}"#,
            JSON,
        ),
        raw(
            "POST",
            &format!("{cms}?fieldValidation=Bogus"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v"}}"#,
            JSON,
        ),
        raw(
            "POST",
            &format!("{cms}?fieldValidation=Strict"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1","a":"2"}}"#,
            JSON,
        ),
        raw(
            "POST",
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v","foo":1},"data":{"a":"1"},"spec":{"x":1}}"#,
            JSON,
        ),
        raw(
            "POST",
            &format!("{cms}?fieldValidation=Ignore"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"quiet"},"spec":{"x":1}}"#,
            JSON,
        ),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldValidation=Strict"),
            r#"{"spec":{"x":1}}"#,
            STRATEGIC,
        ),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldValidation=Strict"),
            r#"{"spec":{"x":1}}"#,
            MERGE,
        ),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldManager=m"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v"},"spec":{"x":1}}"#,
            APPLY,
        ),
        raw(
            "PATCH",
            &format!("{cms}/v"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v"}}"#,
            APPLY,
        ),
        raw("PATCH", &format!("{cms}/v?force=true"), "{}", MERGE),
        raw(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bad"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"nginx","bogus":1},{"name":"d","image":"x","ports":[{"containerPort":80,"nope":true}]}],"foo":2}}}}"#,
            JSON,
        ),
        // Values of the wrong type: Go's decoder for built-in kinds, CRD validation for
        // custom resources, in bodies, patches and applied configurations.
        raw(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"t1"},"spec":{"replicas":"two","selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}"#,
            JSON,
        ),
        raw(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"t2"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":5,"ports":[{"containerPort":1.5}]}]}}}}"#,
            JSON,
        ),
        raw(
            "POST",
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t3","labels":{"a":1}}}"#,
            JSON,
        ),
        raw(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"t4"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":"x"}}"#,
            JSON,
        ),
        raw(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"t5"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"spec":{"containers":{"name":"c"}}}}}"#,
            JSON,
        ),
        raw("PATCH", &format!("{cms}/v"), r#"{"data":{"a":7}}"#, MERGE),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldManager=typed"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v"},"immutable":"yes"}"#,
            APPLY,
        ),
        // Configurations server-side apply refuses, and managedFields a client sends.
        raw(
            "POST",
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owned","managedFields":[{"manager":"z","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]},"data":{"a":"1","b":"2"}}"#,
            JSON,
        ),
        raw(
            "POST",
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"garbled","managedFields":"x"}}"#,
            JSON,
        ),
        raw("PATCH", &format!("{cms}/v?fieldManager=m"), "[1,2]", APPLY),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldManager=m"),
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"v"}}"#,
            APPLY,
        ),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldManager=m"),
            r#"{"metadata":{"name":"v"},"data":{"b":"2"}}"#,
            APPLY,
        ),
        raw(
            "PATCH",
            &format!("{cms}/v?fieldManager=m"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"v","managedFields":[{}]}}"#,
            APPLY,
        ),
        // Server-side apply on a ConfigMap: create, drop a key, conflicts, an updater, force.
        step(
            "PATCH",
            &ssa("fieldManager=m1"),
            cm(json!({"a": "1", "b": "2"}), None),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m1"),
            cm(json!({"a": "1"}), Some(json!({"x": "y"}))),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m2"),
            cm(json!({"a": "2", "c": "3"}), None),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m2"),
            cm(json!({"a": "2", "c": "3"}), Some(json!({"x": "z"}))),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m2"),
            cm(json!({"a": "1", "c": "3"}), None),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m3"),
            Some(json!({"data": {"a": "9", "d": "4"}})),
            MERGE,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m1"),
            cm(json!({"a": "1"}), None),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m1&force=true"),
            cm(json!({"a": "1"}), None),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m2"),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}})),
            APPLY,
        ),
        step(
            "PATCH",
            &ssa("fieldManager=m2"),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}})),
            APPLY,
        ),
        step(
            "PUT",
            &ssa("fieldManager=m4"),
            cm(json!({"z": "1"}), None),
            JSON,
        ),
        step("GET", &format!("{cms}/ssa"), None, JSON),
        // A Deployment applied: decoding defaults, keyed lists (a key's default included).
        step(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=kubectl",
            Some(deploy.clone()),
            APPLY,
        ),
        step(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=other",
            Some(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.26"}]}}}}),
            ),
            APPLY,
        ),
        step(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=kubectl",
            Some(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}}),
            ),
            APPLY,
        ),
        step(
            "POST",
            "/api/v1/namespaces/default/services",
            Some(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
            ),
            JSON,
        ),
        // Workloads' update strategies: defaulted to RollingUpdate, or left as chosen.
        step(
            "POST",
            "/apis/apps/v1/namespaces/default/statefulsets",
            Some(
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "updateStrategy": {"type": "OnDelete"},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}),
            ),
            JSON,
        ),
        step(
            "POST",
            "/apis/apps/v1/namespaces/default/daemonsets",
            Some(
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%"}},
                "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "agent", "image": "busybox"}]}}}}),
            ),
            JSON,
        ),
        step(
            "POST",
            "/apis/apps/v1/namespaces/default/replicasets",
            Some(
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
            "spec": {"selector": {"matchLabels": {"app": "rs"}},
                "template": {"metadata": {"labels": {"app": "rs"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}),
            ),
            JSON,
        ),
        // A template change moves a DaemonSet's template generation; a label change does not.
        step(
            "PATCH",
            "/apis/apps/v1/namespaces/default/daemonsets/agent",
            Some(json!({"metadata": {"labels": {"tier": "node"}}})),
            MERGE,
        ),
        step(
            "PATCH",
            "/apis/apps/v1/namespaces/default/daemonsets/agent",
            Some(
                json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "busybox:1.36"}]}}}}),
            ),
            STRATEGIC,
        ),
        // A custom resource: pruning, keyed list, set and map ownership, status.
        raw(
            "POST",
            &format!("{widgets}?fieldValidation=Strict"),
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","junk":1},"spec":{"size":1,"bad":2,"free":{"any":1},"parts":[{"name":"a","x":1}]},"top":1}"#,
            JSON,
        ),
        raw(
            "POST",
            widgets,
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","junk":1},"spec":{"size":1,"bad":2,"free":{"any":1},"parts":[{"name":"a","x":1}]},"top":1}"#,
            JSON,
        ),
        step(
            "PATCH",
            &w("fieldManager=m"),
            widget(json!({"size": 1, "bad": 2})),
            APPLY,
        ),
        step(
            "PATCH",
            &w("fieldManager=m"),
            widget(
                json!({"size": 2, "parts": [{"name": "b", "count": 1}], "tags": ["x", "y"], "labels": {"k": "v"}}),
            ),
            APPLY,
        ),
        step(
            "PATCH",
            &w("fieldManager=m2"),
            widget(json!({"size": 2, "parts": [{"name": "b", "count": 2}], "tags": ["z"]})),
            APPLY,
        ),
        step(
            "PATCH",
            &w("fieldManager=m2&force=true"),
            widget(json!({"size": 2, "parts": [{"name": "b", "count": 2}], "tags": ["z"]})),
            APPLY,
        ),
        step(
            "PATCH",
            &w("fieldManager=m"),
            widget(json!({"size": 2})),
            APPLY,
        ),
        step(
            "PUT",
            &format!("{widgets}/w/status?fieldManager=st"),
            Some(
                json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"phase": "Up"}}),
            ),
            JSON,
        ),
        step(
            "PATCH",
            &format!("{widgets}/w/status?fieldManager=st"),
            Some(json!({"status": {"phase": "Up"}})),
            MERGE,
        ),
        step("GET", &format!("{widgets}/w"), None, JSON),
    ]
}
