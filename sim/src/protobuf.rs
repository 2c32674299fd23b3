//! Kubernetes' protobuf encoding, decoded for the objects kubectl's typed `create`
//! subcommands send (kubectl 1.33 and later send protobuf there): ConfigMaps, Secrets,
//! Namespaces, ServiceAccounts, Services, Pods, Deployments, Jobs and RBAC objects. The
//! field numbers are those of the Kubernetes API's `generated.proto` files; a field this
//! table does not know fails the request naming it rather than being dropped.
//!
//! A body is `k8s\0` followed by a `runtime.Unknown` message: the object's apiVersion
//! and kind, and its own message as bytes.

use base64::Engine;
use serde_json::{Map, Value};

use kairship_wire::status::{ApiError, ApiResult};

const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bool,
    Int,
    Msg(&'static Desc),
    /// `metav1.Time`: seconds and nanos, written as RFC 3339.
    Time,
    IntOrString,
    /// Read and dropped: a status on create, which the server resets anyway.
    Skip,
    MapStr,
    MapBytes,
    MapQuantity,
}

/// One field: number, JSON name, type, repeated, and whether a zero value is kept (Go
/// pointers: `replicas: 0` is not `replicas` left out).
struct Field(u32, &'static str, Ty, bool, bool);

struct Desc {
    name: &'static str,
    fields: &'static [Field],
}

const fn f(n: u32, name: &'static str, ty: Ty) -> Field {
    Field(n, name, ty, false, false)
}
const fn rep(n: u32, name: &'static str, ty: Ty) -> Field {
    Field(n, name, ty, true, false)
}
const fn ptr(n: u32, name: &'static str, ty: Ty) -> Field {
    Field(n, name, ty, false, true)
}

use Ty::*;

static OBJECT_META: Desc = Desc {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str),
        f(2, "generateName", Str),
        f(3, "namespace", Str),
        f(4, "selfLink", Str),
        f(5, "uid", Str),
        f(6, "resourceVersion", Str),
        f(7, "generation", Int),
        f(8, "creationTimestamp", Time),
        f(9, "deletionTimestamp", Time),
        f(10, "deletionGracePeriodSeconds", Int),
        f(11, "labels", MapStr),
        f(12, "annotations", MapStr),
        rep(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
    ],
};
static OWNER_REFERENCE: Desc = Desc {
    name: "OwnerReference",
    fields: &[
        f(1, "kind", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
        f(5, "apiVersion", Str),
        ptr(6, "controller", Bool),
        ptr(7, "blockOwnerDeletion", Bool),
    ],
};
static LABEL_SELECTOR: Desc = Desc {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", MapStr),
        rep(2, "matchExpressions", Msg(&SELECTOR_REQUIREMENT)),
    ],
};
static SELECTOR_REQUIREMENT: Desc = Desc {
    name: "LabelSelectorRequirement",
    fields: &[
        f(1, "key", Str),
        f(2, "operator", Str),
        rep(3, "values", Str),
    ],
};
static CONFIG_MAP: Desc = Desc {
    name: "ConfigMap",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", MapStr),
        f(3, "binaryData", MapBytes),
        ptr(4, "immutable", Bool),
    ],
};
static SECRET: Desc = Desc {
    name: "Secret",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", MapBytes),
        f(3, "type", Str),
        f(4, "stringData", MapStr),
        ptr(5, "immutable", Bool),
    ],
};
static NAMESPACE: Desc = Desc {
    name: "Namespace",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&NAMESPACE_SPEC)),
        f(3, "status", Skip),
    ],
};
static NAMESPACE_SPEC: Desc = Desc {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};
static SERVICE_ACCOUNT: Desc = Desc {
    name: "ServiceAccount",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(3, "imagePullSecrets", Msg(&LOCAL_REFERENCE)),
        ptr(4, "automountServiceAccountToken", Bool),
    ],
};
static LOCAL_REFERENCE: Desc = Desc {
    name: "LocalObjectReference",
    fields: &[f(1, "name", Str)],
};
static SERVICE: Desc = Desc {
    name: "Service",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&SERVICE_SPEC)),
        f(3, "status", Skip),
    ],
};
static SERVICE_SPEC: Desc = Desc {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", Msg(&SERVICE_PORT)),
        f(2, "selector", MapStr),
        f(3, "clusterIP", Str),
        f(4, "type", Str),
        rep(5, "externalIPs", Str),
        f(7, "sessionAffinity", Str),
        f(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        f(10, "externalName", Str),
        f(11, "externalTrafficPolicy", Str),
        f(12, "healthCheckNodePort", Int),
        f(13, "publishNotReadyAddresses", Bool),
        f(17, "ipFamilyPolicy", Str),
        rep(18, "clusterIPs", Str),
        rep(19, "ipFamilies", Str),
        ptr(20, "allocateLoadBalancerNodePorts", Bool),
        f(21, "loadBalancerClass", Str),
        f(22, "internalTrafficPolicy", Str),
        f(23, "trafficDistribution", Str),
    ],
};
static SERVICE_PORT: Desc = Desc {
    name: "ServicePort",
    fields: &[
        f(1, "name", Str),
        f(2, "protocol", Str),
        f(3, "port", Int),
        f(4, "targetPort", IntOrString),
        f(5, "nodePort", Int),
        f(6, "appProtocol", Str),
    ],
};
static POD: Desc = Desc {
    name: "Pod",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_SPEC)),
        f(3, "status", Skip),
    ],
};
static POD_TEMPLATE: Desc = Desc {
    name: "PodTemplateSpec",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_SPEC)),
    ],
};
static POD_SPEC: Desc = Desc {
    name: "PodSpec",
    fields: &[
        rep(2, "containers", Msg(&CONTAINER)),
        f(3, "restartPolicy", Str),
        ptr(4, "terminationGracePeriodSeconds", Int),
        ptr(5, "activeDeadlineSeconds", Int),
        f(6, "dnsPolicy", Str),
        f(7, "nodeSelector", MapStr),
        f(8, "serviceAccountName", Str),
        f(9, "serviceAccount", Str),
        f(10, "nodeName", Str),
        f(11, "hostNetwork", Bool),
        f(12, "hostPID", Bool),
        f(13, "hostIPC", Bool),
        rep(15, "imagePullSecrets", Msg(&LOCAL_REFERENCE)),
        f(16, "hostname", Str),
        f(17, "subdomain", Str),
        f(19, "schedulerName", Str),
        rep(20, "initContainers", Msg(&CONTAINER)),
        ptr(21, "automountServiceAccountToken", Bool),
        f(24, "priorityClassName", Str),
        ptr(25, "priority", Int),
        ptr(27, "shareProcessNamespace", Bool),
        f(29, "runtimeClassName", Str),
        ptr(30, "enableServiceLinks", Bool),
        f(31, "preemptionPolicy", Str),
        ptr(35, "setHostnameAsFQDN", Bool),
        ptr(37, "hostUsers", Bool),
        f(41, "hostnameOverride", Str),
    ],
};
static CONTAINER: Desc = Desc {
    name: "Container",
    fields: &[
        f(1, "name", Str),
        f(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        f(5, "workingDir", Str),
        rep(6, "ports", Msg(&CONTAINER_PORT)),
        rep(7, "env", Msg(&ENV_VAR)),
        f(8, "resources", Msg(&RESOURCES)),
        f(13, "terminationMessagePath", Str),
        f(14, "imagePullPolicy", Str),
        f(16, "stdin", Bool),
        f(17, "stdinOnce", Bool),
        f(18, "tty", Bool),
        f(20, "terminationMessagePolicy", Str),
        f(24, "restartPolicy", Str),
    ],
};
static CONTAINER_PORT: Desc = Desc {
    name: "ContainerPort",
    fields: &[
        f(1, "name", Str),
        f(2, "hostPort", Int),
        f(3, "containerPort", Int),
        f(4, "protocol", Str),
        f(5, "hostIP", Str),
    ],
};
static ENV_VAR: Desc = Desc {
    name: "EnvVar",
    fields: &[f(1, "name", Str), f(2, "value", Str)],
};
static RESOURCES: Desc = Desc {
    name: "ResourceRequirements",
    fields: &[f(1, "limits", MapQuantity), f(2, "requests", MapQuantity)],
};
static DEPLOYMENT: Desc = Desc {
    name: "Deployment",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&DEPLOYMENT_SPEC)),
        f(3, "status", Skip),
    ],
};
static DEPLOYMENT_SPEC: Desc = Desc {
    name: "DeploymentSpec",
    fields: &[
        ptr(1, "replicas", Int),
        f(2, "selector", Msg(&LABEL_SELECTOR)),
        f(3, "template", Msg(&POD_TEMPLATE)),
        f(4, "strategy", Msg(&STRATEGY)),
        f(5, "minReadySeconds", Int),
        ptr(6, "revisionHistoryLimit", Int),
        f(7, "paused", Bool),
        ptr(9, "progressDeadlineSeconds", Int),
    ],
};
static STRATEGY: Desc = Desc {
    name: "DeploymentStrategy",
    fields: &[
        f(1, "type", Str),
        f(2, "rollingUpdate", Msg(&ROLLING_UPDATE)),
    ],
};
static ROLLING_UPDATE: Desc = Desc {
    name: "RollingUpdateDeployment",
    fields: &[
        f(1, "maxUnavailable", IntOrString),
        f(2, "maxSurge", IntOrString),
    ],
};
static JOB: Desc = Desc {
    name: "Job",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&JOB_SPEC)),
        f(3, "status", Skip),
    ],
};
static JOB_SPEC: Desc = Desc {
    name: "JobSpec",
    fields: &[
        ptr(1, "parallelism", Int),
        ptr(2, "completions", Int),
        ptr(3, "activeDeadlineSeconds", Int),
        f(4, "selector", Msg(&LABEL_SELECTOR)),
        ptr(5, "manualSelector", Bool),
        f(6, "template", Msg(&POD_TEMPLATE)),
        ptr(7, "backoffLimit", Int),
        ptr(8, "ttlSecondsAfterFinished", Int),
        f(9, "completionMode", Str),
        ptr(10, "suspend", Bool),
        ptr(12, "backoffLimitPerIndex", Int),
        ptr(13, "maxFailedIndexes", Int),
        f(14, "podReplacementPolicy", Str),
        f(15, "managedBy", Str),
    ],
};
static ROLE: Desc = Desc {
    name: "Role",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "rules", Msg(&POLICY_RULE)),
        f(3, "aggregationRule", Msg(&AGGREGATION_RULE)),
    ],
};
static POLICY_RULE: Desc = Desc {
    name: "PolicyRule",
    fields: &[
        rep(1, "verbs", Str),
        rep(2, "apiGroups", Str),
        rep(3, "resources", Str),
        rep(4, "resourceNames", Str),
        rep(5, "nonResourceURLs", Str),
    ],
};
static AGGREGATION_RULE: Desc = Desc {
    name: "AggregationRule",
    fields: &[rep(1, "clusterRoleSelectors", Msg(&LABEL_SELECTOR))],
};
static BINDING: Desc = Desc {
    name: "RoleBinding",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "subjects", Msg(&SUBJECT)),
        f(3, "roleRef", Msg(&ROLE_REF)),
    ],
};
static SUBJECT: Desc = Desc {
    name: "Subject",
    fields: &[
        f(1, "kind", Str),
        f(2, "apiGroup", Str),
        f(3, "name", Str),
        f(4, "namespace", Str),
    ],
};
static ROLE_REF: Desc = Desc {
    name: "RoleRef",
    fields: &[f(1, "apiGroup", Str), f(2, "kind", Str), f(3, "name", Str)],
};

/// The message of a kind, by apiVersion and kind (`Role` and `ClusterRole` share one:
/// a Role never carries an aggregation rule).
fn kind_desc(api_version: &str, kind: &str) -> Option<&'static Desc> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => &CONFIG_MAP,
        ("v1", "Secret") => &SECRET,
        ("v1", "Namespace") => &NAMESPACE,
        ("v1", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("v1", "Service") => &SERVICE,
        ("v1", "Pod") => &POD,
        ("apps/v1", "Deployment") => &DEPLOYMENT,
        ("batch/v1", "Job") => &JOB,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => &ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => &BINDING,
        _ => return None,
    })
}

/// Decodes a protobuf request body into the object's JSON form.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("protobuf body without the k8s\\0 prefix"))?;
    let mut type_meta = (String::new(), String::new());
    let mut raw: &[u8] = &[];
    for item in Reader(unknown) {
        let (n, wire) = item?;
        match (n, wire) {
            (1, Wire::Len(b)) => {
                for item in Reader(b) {
                    match item? {
                        (1, Wire::Len(s)) => type_meta.0 = utf8(s)?,
                        (2, Wire::Len(s)) => type_meta.1 = utf8(s)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(b)) => raw = b,
            _ => {}
        }
    }
    let (api_version, kind) = type_meta;
    let desc = kind_desc(&api_version, &kind).ok_or_else(|| {
        ApiError::unsupported_media_type(&format!(
            "application/vnd.kubernetes.protobuf for {kind} ({api_version}); send JSON"
        ))
    })?;
    let mut obj = message(raw, desc)?;
    obj.insert("apiVersion".into(), api_version.into());
    obj.insert("kind".into(), kind.into());
    Ok(Value::Object(obj))
}

enum Wire<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

/// The fields of one message, in order.
struct Reader<'a>(&'a [u8]);

impl<'a> Iterator for Reader<'a> {
    type Item = ApiResult<(u32, Wire<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        Some(self.read())
    }
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> ApiResult<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().ok_or_else(truncated)?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(truncated())
    }

    fn take(&mut self, n: usize) -> ApiResult<&'a [u8]> {
        if self.0.len() < n {
            return Err(truncated());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn read(&mut self) -> ApiResult<(u32, Wire<'a>)> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| truncated())?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| truncated())?;
                Wire::Len(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            t => {
                return Err(ApiError::bad_request(format!(
                    "protobuf body: unsupported wire type {t}"
                )))
            }
        };
        Ok((number, wire))
    }
}

fn truncated() -> ApiError {
    ApiError::bad_request("protobuf body is truncated")
}

fn utf8(b: &[u8]) -> ApiResult<String> {
    String::from_utf8(b.to_vec())
        .map_err(|_| ApiError::bad_request("protobuf body: a string is not UTF-8"))
}

fn message(b: &[u8], desc: &Desc) -> ApiResult<Map<String, Value>> {
    let mut out = Map::new();
    for item in Reader(b) {
        let (n, wire) = item?;
        let Some(Field(_, name, ty, repeated, keep_zero)) = desc.fields.iter().find(|fd| fd.0 == n)
        else {
            return Err(ApiError::bad_request(format!(
                "the simulator does not decode protobuf field {n} of {}; send JSON",
                desc.name
            )));
        };
        let value = scalar_or_message(*ty, wire, &mut out, name)?;
        let Some(value) = value else { continue };
        if *repeated {
            let list = out.entry(*name).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = list {
                a.push(value);
            }
        } else if *keep_zero || !is_zero(&value) {
            out.insert((*name).into(), value);
        }
    }
    Ok(out)
}

/// One field's value; maps add their entry to `out` themselves (and answer `None`).
fn scalar_or_message(
    ty: Ty,
    wire: Wire<'_>,
    out: &mut Map<String, Value>,
    name: &str,
) -> ApiResult<Option<Value>> {
    let wrong = || {
        ApiError::bad_request(format!(
            "protobuf body: field {name} has the wrong wire type"
        ))
    };
    Ok(Some(match (ty, wire) {
        (Str, Wire::Len(b)) => Value::String(utf8(b)?),
        (Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        // Two's complement: int32 and int64 are written as 64-bit varints.
        (Int, Wire::Varint(v)) => Value::from(v as i64),
        (Msg(d), Wire::Len(b)) => Value::Object(message(b, d)?),
        (Time, Wire::Len(b)) => time(b)?,
        (IntOrString, Wire::Len(b)) => int_or_string(b)?,
        (Skip, _) => return Ok(None),
        (MapStr | MapBytes | MapQuantity, Wire::Len(b)) => {
            let (mut key, mut value) = (String::new(), Value::Null);
            for item in Reader(b) {
                match (item?, ty) {
                    ((1, Wire::Len(k)), _) => key = utf8(k)?,
                    ((2, Wire::Len(v)), MapStr) => value = Value::String(utf8(v)?),
                    ((2, Wire::Len(v)), MapBytes) => {
                        value = Value::String(base64::engine::general_purpose::STANDARD.encode(v))
                    }
                    ((2, Wire::Len(v)), _) => value = quantity(v)?,
                    _ => {}
                }
            }
            if value.is_null() {
                value = Value::String(String::new());
            }
            let map = out.entry(name).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = map {
                m.insert(key, value);
            }
            return Ok(None);
        }
        _ => return Err(wrong()),
    }))
}

/// A Go zero value, which the JSON form leaves out (`omitempty`).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn time(b: &[u8]) -> ApiResult<Value> {
    let mut seconds = 0i64;
    for item in Reader(b) {
        if let (1, Wire::Varint(v)) = item? {
            seconds = v as i64;
        }
    }
    if seconds == 0 {
        return Ok(Value::Null);
    }
    let t = jiff::Timestamp::from_second(seconds)
        .map_err(|_| ApiError::bad_request("protobuf body: a time is out of range"))?;
    Ok(Value::String(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn int_or_string(b: &[u8]) -> ApiResult<Value> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    for item in Reader(b) {
        match item? {
            (1, Wire::Varint(t)) => is_string = t == 1,
            (2, Wire::Varint(v)) => int = v as i64,
            (3, Wire::Len(s)) => string = utf8(s)?,
            _ => {}
        }
    }
    Ok(match is_string {
        true => Value::String(string),
        false => Value::from(int),
    })
}

fn quantity(b: &[u8]) -> ApiResult<Value> {
    let mut s = String::new();
    for item in Reader(b) {
        if let (1, Wire::Len(v)) = item? {
            s = utf8(v)?;
        }
    }
    Ok(Value::String(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![
            u8::try_from((n << 3) | 2).unwrap_or(0),
            u8::try_from(payload.len()).unwrap_or(0),
        ];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_config_map_as_kubectl_sends_it() {
        let meta = [field(1, b"web"), field(3, b"")].concat();
        let entry = [field(1, b"a"), field(2, b"1")].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).expect("decodes");
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}, "data": {"a": "1"}})
        );
        let unknown = [field(1, &meta), field(9, b"x")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &unknown)].concat();
        let e = decode(&body).expect_err("unknown field");
        assert!(e.message.contains("field 9 of ConfigMap"), "{}", e.message);
    }
}
