//! The `scale` subresource of Deployments and StatefulSets (`autoscaling/v1` Scale), which
//! `kubectl scale` reads and patches.

use axum::body::Body;
use http::{header, Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::{json_response, ApiServer};
use crate::patch::{self, PatchKind};
use crate::resources::ResourceDef;
use crate::store::{Obj, Store};
use kairship_wire::routes::ResourcePath;
use kairship_wire::status::{ApiError, ApiResult};

/// Whether `def` serves `/scale`.
pub fn served(def: &ResourceDef) -> bool {
    def.group == "apps" && matches!(def.plural.as_str(), "deployments" | "statefulsets")
}

/// The Scale view of a workload.
pub fn view(o: &Obj) -> Value {
    let v = &o.value;
    let labels = v
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": v["metadata"]["name"], "namespace": v["metadata"]["namespace"],
            "uid": v["metadata"]["uid"], "resourceVersion": v["metadata"]["resourceVersion"],
            "creationTimestamp": v["metadata"]["creationTimestamp"]},
        "spec": {"replicas": v["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {"replicas": v["status"]["replicas"].as_i64().unwrap_or(0), "selector": labels},
    })
}

/// Applies a new Scale (PUT body, or a patch of the current Scale) to the workload.
pub fn write(
    store: &Store,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
    kind: Option<PatchKind>,
    body: &[u8],
) -> ApiResult<Value> {
    let current = store.get(def, ns, name)?;
    let mut scale = view(&current);
    match kind {
        Some(k) => patch::apply(k, &mut scale, body)?,
        None => {
            scale = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("decoding Scale: {e}")))?
        }
    }
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::bad_request(
                "Scale.spec.replicas: Invalid value: must be a non-negative integer",
            )
        })?;
    let mut rv = json!({"spec": {"replicas": replicas}});
    // A resourceVersion in the Scale is a precondition on the workload.
    if let Some(v) = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        if v != current.rv.to_string() && kind.is_none() {
            return Err(ApiError::conflict(def.target(name)));
        }
    }
    let updated = store.patch(
        def,
        ns,
        name,
        PatchKind::Merge,
        rv.take().to_string().as_bytes(),
        false,
    )?;
    Ok(view(&updated))
}

impl ApiServer {
    /// GET, PUT and PATCH of a workload's `scale` subresource.
    pub(super) async fn scale(
        &self,
        req: Request<Body>,
        def: &ResourceDef,
        rp: &ResourcePath,
        user: &str,
    ) -> ApiResult<Response<Body>> {
        self.record(user, req.method(), rp, false);
        let ns = rp.namespace.as_deref();
        let name = rp
            .name
            .clone()
            .ok_or_else(|| ApiError::method_not_allowed(req.method().as_str()))?;
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let scale = match req.method().clone() {
            Method::GET => view(&self.store.get(def, ns, &name)?),
            Method::PUT => {
                let body = self.read_body(req).await?;
                write(&self.store, def, ns, &name, None, &body)?
            }
            Method::PATCH => {
                let kind = PatchKind::from_content_type(&content_type)?;
                let body = self.read_body(req).await?;
                write(&self.store, def, ns, &name, Some(kind), &body)?
            }
            m => return Err(ApiError::method_not_allowed(m.as_str())),
        };
        Ok(json_response(StatusCode::OK, &scale))
    }
}
