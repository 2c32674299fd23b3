//! The one handler chain every protected request passes, whatever its surface (gRPC on
//! either port, REST, the kubectl proxy, the chaos report, `/metrics`), in the order of
//! kube-apiserver's `DefaultBuildHandlerChain`:
//!
//! ```text
//! limits          the server (`api::serve`): connections, header and idle timeouts,
//!                 HTTP/2 streams, body sizes and times
//! authentication  `authn`: the bearer token; 401 otherwise (audited)
//! audit           `audit`: one audit.k8s.io/v1 Event per write and per refusal
//! fairness        `fairness`: requests in flight per caller and per server, watches
//!                 counted apart; 429 with Retry-After otherwise
//! resolve         `resolve`: what the request asks (method, path, message), the rule
//!                 for it (`rules`): the role it needs, on which instance
//! authorization   `authz`: the caller's role against it; 403 otherwise
//! route           `route`: a request on an instance another replica owns (sharded) is
//!                 answered by that replica
//! handler
//! ```
//!
//! [`Chain::protect`] mounts it once over every protected route. The routes that need no
//! token are mounted beside it, by name, in `api::serve`: the probes, the console's files
//! and its configuration, the OpenAPI document, gRPC health, and the HMAC-signed webhook
//! (which audits itself through [`Chain::sink`]).
//!
//! A handler acts for a caller only with an [`authz::Authorized`], which only the
//! authorization layer makes (its fields are private to this module): reaching an
//! instance (`ApiContext::on_instance`) or the host for a caller takes one, so a route
//! mounted outside the chain cannot act for anyone, and the compiler says so.

pub mod audit;
pub mod authn;
pub mod authz;
pub mod fairness;
pub mod grpc_frame;
pub mod observe;
pub mod resolve;
pub mod route;
pub mod rules;

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::from_fn_with_state;
use axum::response::Response;

use crate::api::context::ApiContext;
use crate::api::request_info::RequestInfo;
use crate::error::ApiError;

pub use authn::Authenticated;
pub use authz::Authorized;
pub use resolve::Transcoded;

pub use crate::api::request_info::{proxied, Surface};

/// A refusal in the words of `surface`.
pub fn refusal(surface: Surface, e: &ApiError) -> Response {
    use crate::api::answer;
    let mut resp = match surface {
        Surface::Grpc => answer::grpc_failure(e),
        Surface::Rest => answer::rest_failure(&answer::Failure::from(e.clone())),
        Surface::Proxy => answer::status_response(e),
    };
    if matches!(e, ApiError::ResourceExhausted(_)) {
        // As kube-apiserver's 429s: when to come back.
        resp.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    resp
}

/// The chain's state: the API's context, where audit events go, the fairness bounds, and
/// REST's rules (the authorization layer transcodes REST requests to decide on them).
pub struct Chain {
    pub ctx: ApiContext,
    pub sink: Arc<audit::Sink>,
    /// Unauthenticated refusals' events: rate-limited, written off the request path.
    pub unauthenticated: audit::Unauthenticated,
    pub fairness: fairness::Fairness,
    rest_rules: Vec<crate::api::transcode::rules::Rule>,
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("the API's descriptors: {0}")]
    Descriptors(String),
}

impl Chain {
    pub fn new(
        ctx: ApiContext,
        sink: Arc<audit::Sink>,
        limits: fairness::Limits,
    ) -> Result<Arc<Self>, ChainError> {
        let rest_rules = crate::api::transcode::rules::rules(crate::proto::FILE_DESCRIPTOR_SET)
            .map_err(|e| ChainError::Descriptors(e.to_string()))?;
        Ok(Arc::new(Self {
            ctx,
            sink,
            unauthenticated: Default::default(),
            fairness: fairness::Fairness::new(limits),
            rest_rules,
        }))
    }

    /// `router` behind the chain: every request to it is authenticated, audited, fairly
    /// admitted and authorized before a handler sees it.
    pub fn protect(self: &Arc<Self>, router: axum::Router) -> axum::Router {
        // The last layer added is the first a request meets.
        router
            .layer(from_fn_with_state(self.clone(), route::layer))
            .layer(from_fn_with_state(self.clone(), authz::layer))
            .layer(from_fn_with_state(self.clone(), resolve::layer))
            .layer(from_fn_with_state(self.clone(), fairness_layer))
            .layer(from_fn_with_state(self.clone(), audit_layer))
            .layer(from_fn_with_state(self.clone(), authn::layer))
    }

    pub fn sink(&self) -> &audit::Sink {
        &self.sink
    }
}

/// The audit layer: a record for the request, filled by what comes after, emitted once
/// the answer's head is known.
async fn audit_layer(
    axum::extract::State(chain): axum::extract::State<Arc<Chain>>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    let info = RequestInfo::of(&req);
    let surface = info.surface;
    let record = audit::Record::of_request(&req, surface);
    // What the head says already, for refusals made before authorization reads the rest.
    let instance = info.proxied.map(|(i, _)| i);
    record.update(|f| {
        f.verb = audit::rough_verb(&req, surface);
        f.instance = instance;
    });
    let user = req
        .extensions()
        .get::<Authenticated>()
        .map(|a| audit::User::of(a.caller()));
    req.extensions_mut().insert(record.clone());
    let resp = next.run(req).await;
    if let Some(user) = user {
        let (code, failure) = audit::outcome(surface, &resp, &record);
        if let Some(event) = record.event(user, code, failure) {
            chain.sink.emit(&event);
        }
    }
    resp
}

/// The fairness layer: a slot for the caller (and the server) held until the answer is
/// done; 429 when none comes free within the queue wait.
async fn fairness_layer(
    axum::extract::State(chain): axum::extract::State<Arc<Chain>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let info = RequestInfo::of(&req);
    let surface = info.surface;
    let Some(user) = req
        .extensions()
        .get::<Authenticated>()
        .map(|a| a.caller().user.name.clone())
    else {
        return refusal(surface, &ApiError::Internal("no caller".into()));
    };
    let long = info.long_running;
    if let Some(r) = req.extensions().get::<audit::Record>() {
        r.update(|f| f.long_running = long);
    }
    match chain.fairness.admit(&user, long).await {
        Ok(held) => fairness::hold_until_done(next.run(req).await, held),
        Err(e) => {
            if let Some(r) = req.extensions().get::<audit::Record>() {
                r.update(|f| f.decision = Some(("forbid", e.to_string())));
            }
            refusal(surface, &e)
        }
    }
}

/// A watch through the proxy: `watch` set in the query (anything but `0`/`false`, as
/// kube-apiserver reads it) or the legacy `/watch/` path.
pub fn watching<B>(req: &http::Request<B>) -> bool {
    RequestInfo::of(req).watching
}

/// Requests that stay open (`RequestInfo::long_running`).
pub fn long_running<B>(req: &http::Request<B>) -> bool {
    RequestInfo::of(req).long_running
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str) -> http::Request<()> {
        http::Request::get(uri).body(()).expect("request")
    }

    #[test]
    fn surfaces_and_long_running_requests_are_told_apart() {
        let p = "/apis/kairship.io/v1alpha1/instances/k1/proxy";
        assert_eq!(proxied(p), Some(("k1", "/")));
        assert_eq!(
            proxied(&format!("{p}/api/v1/pods")),
            Some(("k1", "/api/v1/pods"))
        );
        assert_eq!(
            proxied("/apis/kairship.io/v1alpha1/instances/k1/proxyx"),
            None
        );
        assert_eq!(Surface::of(&req(p)), Surface::Proxy);
        assert_eq!(
            Surface::of(&req("/apis/kairship.io/v1alpha1/instances")),
            Surface::Rest
        );
        let mut g = req("/kairship.v1alpha1.InstanceService/ListInstances");
        g.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/grpc+proto"),
        );
        assert_eq!(Surface::of(&g), Surface::Grpc);
        assert!(long_running(&req(&format!(
            "{p}/apis/apps/v1/deployments?watch=1"
        ))));
        assert!(long_running(&req(&format!(
            "{p}/api/v1/namespaces/d/pods/x/log?follow=true"
        ))));
        assert!(!long_running(&req(&format!(
            "{p}/api/v1/namespaces/d/pods/x/log?follow=false"
        ))));
        assert!(!long_running(&req(&format!(
            "{p}/apis/apps/v1/deployments"
        ))));
    }
}
