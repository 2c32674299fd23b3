//! Authentication, the chain's first layer after the server's limits: the bearer token of
//! the `authorization` header (gRPC metadata is the same HTTP/2 header), checked before
//! any body is read. A missing or bad token is refused with the same words whatever went
//! wrong, and audited (at a bounded rate, off the request path: `audit::Unauthenticated`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::{audit, refusal, Chain, Surface};
use crate::auth::Caller;

/// The caller a request's token names; only this layer makes one.
#[derive(Debug, Clone)]
pub struct Authenticated(Caller);

impl Authenticated {
    pub fn caller(&self) -> &Caller {
        &self.0
    }
}

pub async fn layer(State(chain): State<Arc<Chain>>, mut req: Request, next: Next) -> Response {
    let surface = Surface::of(&req);
    let header = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match chain.ctx.auth.authenticate(header) {
        Ok(caller) => {
            req.extensions_mut().insert(Authenticated(caller));
            next.run(req).await
        }
        Err(e) => {
            let record = audit::Record::of_request(&req, surface);
            record.update(|f| f.verb = audit::rough_verb(&req, surface));
            let anonymous = audit::User {
                username: "system:anonymous".into(),
                uid: String::new(),
                groups: vec!["system:unauthenticated".into()],
            };
            let failure = Some(("Unauthorized".to_string(), e.to_string()));
            if let Some(event) = record.event(anonymous, e.http_status(), failure) {
                chain.unauthenticated.emit(&chain.sink, event);
            }
            refusal(surface, &e)
        }
    }
}
