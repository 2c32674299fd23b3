//! Authorization, the chain's decision and nothing else: the caller's role against what
//! the resolve layer found the request asks ([`Target`]). Only this layer makes an
//! [`Authorized`], the handlers' one way to act for a caller.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::audit::Record;
use super::resolve::{On, Target};
use super::{refusal, Authenticated, Chain, Surface};
use crate::api::request_info::RequestInfo;
use crate::auth::Caller;
use crate::error::{check_name, ApiError};

/// A request the chain let through: who calls, by which surface, and the instance they were
/// authorized on (none for requests over what the caller may see: lists, search).
#[derive(Debug, Clone)]
pub struct Authorized {
    caller: Caller,
    surface: Surface,
    instance: Option<String>,
    record: Record,
    credential: Credential,
}

/// The `Authorization` header the caller sent, so a replica can ask its peers for this
/// caller's share of a fleet-wide answer (each peer authenticates it again). Never shown.
#[derive(Clone, Default)]
pub struct Credential(Option<http::HeaderValue>);

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "<redacted>"
        } else {
            "none"
        })
    }
}

impl Credential {
    pub fn header(&self) -> Option<&http::HeaderValue> {
        self.0.as_ref()
    }
}

impl Authorized {
    /// The authorization a gRPC handler's request carries (INTERNAL when it came by
    /// another road than the chain: a mounting error, never the caller's).
    pub fn of<T>(req: &tonic::Request<T>) -> Result<Self, ApiError> {
        req.extensions()
            .get::<Self>()
            .cloned()
            .ok_or_else(|| ApiError::Internal("the request did not pass the handler chain".into()))
    }

    /// As [`of`](Self::of), for an HTTP handler.
    pub fn of_http(ext: &http::Extensions) -> Result<Self, ApiError> {
        ext.get::<Self>()
            .cloned()
            .ok_or_else(|| ApiError::Internal("the request did not pass the handler chain".into()))
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    pub fn surface(&self) -> Surface {
        self.surface
    }

    pub fn record(&self) -> &Record {
        &self.record
    }

    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// The instance the request was authorized on, which must be `named` (the handler's
    /// reading of the same message).
    pub fn instance(&self, named: &str) -> Result<&str, ApiError> {
        match &self.instance {
            Some(i) if i == named => Ok(i),
            _ => Err(ApiError::Internal(format!(
                "instance {named:?} is not the one the request was authorized on"
            ))),
        }
    }
}

/// The authorization layer: allowed, the request goes on with its [`Authorized`];
/// forbidden, it is answered here (audited as a refusal).
pub async fn layer(State(chain): State<Arc<Chain>>, mut req: Request, next: Next) -> Response {
    let surface = RequestInfo::surface_of(&req);
    let (Some(caller), Some(record), Some(target)) = (
        req.extensions()
            .get::<Authenticated>()
            .map(|a| a.caller().clone()),
        req.extensions().get::<Record>().cloned(),
        req.extensions().get::<Target>(),
    ) else {
        return refusal(surface, &ApiError::Internal("no caller".into()));
    };
    // Decided here first, on every replica (role bindings are cached on each), so a caller
    // with no role learns nothing of where an instance runs or whether it is moving.
    match decide(&chain, &caller, target) {
        Ok(why) => {
            record.update(|f| f.decision = Some(("allow", why)));
            let instance = target.instance().map(str::to_string);
            let credential = Credential(req.headers().get(http::header::AUTHORIZATION).cloned());
            req.extensions_mut().insert(Authorized {
                caller,
                surface,
                instance,
                record,
                credential,
            });
            next.run(req).await
        }
        Err(e) => {
            record.update(|f| f.decision = Some(("forbid", e.to_string())));
            refusal(surface, &e)
        }
    }
}

/// PERMISSION_DENIED (or INVALID_ARGUMENT for a malformed instance name) unless the caller
/// holds what the target needs; the reason otherwise.
fn decide(chain: &Chain, caller: &Caller, t: &Target) -> Result<String, ApiError> {
    let auth = &chain.ctx.auth;
    match &t.on {
        On::Instance { name, field } => {
            check_name(field, name)?;
            auth.authorize(caller, t.need, name, &t.action)?;
            Ok(format!(
                "role {:?} or more on instance {name:?}",
                t.need.as_str()
            ))
        }
        On::Caller => Ok("any authenticated caller; answers filtered by role".into()),
        On::Fleet => match auth.sees_all(caller) {
            true => Ok("a role on every instance".into()),
            false => Err(ApiError::PermissionDenied(format!(
                "user {:?} may not {}: it covers every instance, and a role on each is needed",
                caller.user.name, t.action
            ))),
        },
    }
}
