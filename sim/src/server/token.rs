//! `serviceaccounts/{name}/token` (TokenRequest): a bearer token for a ServiceAccount, as
//! kube-apiserver issues bound tokens: valid for `spec.expirationSeconds` (at least ten
//! minutes, an hour when unset), authenticating as `system:serviceaccount:<ns>:<name>` in
//! the groups `system:serviceaccounts` and `system:serviceaccounts:<ns>`, so RBAC bindings
//! of the ServiceAccount decide what it may do.

use std::time::{Duration, Instant};

use axum::body::Body;
use http::{Method, Request, Response, StatusCode};
use kairship_wire::routes::ResourcePath;
use kairship_wire::status::{ApiError, ApiResult, Target};
use serde_json::json;

use super::{json_response, random_token, ApiServer};
use crate::rbac::Identity;
use crate::resources::ResourceDef;

/// The shortest a token may live, as kube-apiserver insists.
const MIN_SECONDS: i64 = 600;
const DEFAULT_SECONDS: i64 = 3600;

impl ApiServer {
    pub(super) async fn token_request(
        &self,
        req: Request<Body>,
        def: &ResourceDef,
        rp: &ResourcePath,
        user: &str,
    ) -> ApiResult<Response<Body>> {
        self.record(user, req.method(), rp, false);
        if req.method() != Method::POST {
            return Err(ApiError::method_not_allowed(req.method().as_str()));
        }
        let (Some(ns), Some(name)) = (rp.namespace.clone(), rp.name.clone()) else {
            return Err(ApiError::path_not_found(req.uri().path()));
        };
        let account = self.store.get(def, Some(&ns), &name)?;
        let body = self.read_json(req).await?;
        let seconds = body["spec"]["expirationSeconds"]
            .as_i64()
            .unwrap_or(DEFAULT_SECONDS);
        if seconds < MIN_SECONDS {
            let t = Target {
                group: "authentication.k8s.io",
                kind: "TokenRequest",
                plural: "tokenrequests",
                name: &name,
            };
            return Err(ApiError::invalid(
                t,
                "spec.expirationSeconds",
                format!(
                    "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
            ));
        }
        let token = random_token();
        let who = Identity {
            user: format!("system:serviceaccount:{ns}:{name}"),
            uid: account.value["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
        };
        let lifetime = Duration::from_secs(seconds.unsigned_abs());
        self.users.write().insert(token.clone(), who);
        self.token_expiry
            .write()
            .insert(token.clone(), Instant::now() + lifetime);
        let expires = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        let mut spec = body["spec"].clone();
        spec["expirationSeconds"] = seconds.into();
        Ok(json_response(
            StatusCode::CREATED,
            &json!({
                "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
                "spec": spec,
                "status": {"token": token, "expirationTimestamp": expires},
            }),
        ))
    }
}
