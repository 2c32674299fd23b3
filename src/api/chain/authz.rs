//! Authorization, the chain's last layer: what the request is (its gRPC method and the
//! instance its message names; REST's transcoded method and message; the proxied path),
//! the rule for it (`rules`), and the caller's role where the rule says. Only this layer
//! makes an [`Authorized`], the handlers' one way to act for a caller.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prost_reflect::{DynamicMessage, MessageDescriptor, Value};

use super::audit::{ObjectRef, Record};
pub use super::grpc_frame::frame;
use super::rules::{self, Rule, Scope};
use super::{grpc_frame, proxied, refusal, Authenticated, Chain, Surface};
use crate::auth::{Caller, Role};
use crate::error::{check_name, ApiError};

/// REST bodies beyond this are refused (kube-apiserver's own bound on a request body).
pub const MAX_REST_BODY: usize = 3 * 1024 * 1024;

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

/// A REST request turned into its gRPC method's request message (REST then calls the
/// method in process).
#[derive(Clone)]
pub struct Transcoded {
    pub grpc_path: String,
    pub output: MessageDescriptor,
    pub message: DynamicMessage,
    /// A server-streaming method.
    pub streaming: bool,
}

/// What a request asks, for the decision and the audit event.
struct Target {
    need: Role,
    /// The instance whose role decides, and the field that named it.
    on: On,
    action: String,
    verb: String,
    writes: bool,
    object: Option<ObjectRef>,
}

enum On {
    Instance { name: String, field: &'static str },
    Caller,
    Fleet,
}

pub async fn layer(State(chain): State<Arc<Chain>>, req: Request, next: Next) -> Response {
    let surface = Surface::of(&req);
    let (Some(caller), Some(record)) = (
        req.extensions()
            .get::<Authenticated>()
            .map(|a| a.caller().clone()),
        req.extensions().get::<Record>().cloned(),
    ) else {
        return refusal(surface, &ApiError::Internal("no caller".into()));
    };
    let (req, target) = match resolve(&chain, req, surface).await {
        Ok(x) => x,
        Err(answer) => return answer,
    };
    let instance = match &target.on {
        On::Instance { name, .. } => Some(name.clone()),
        _ => None,
    };
    record.update(|f| {
        f.verb = target.verb.clone();
        f.writes = target.writes;
        f.object = target.object.clone();
        f.instance = instance.clone();
    });
    // Decided here first, on every replica (role bindings are cached on each), so a caller
    // with no role learns nothing of where an instance runs or whether it is moving.
    match decide(&chain, &caller, &target) {
        Ok(why) => {
            record.update(|f| f.decision = Some(("allow", why)));
            // Sharded: the replica that owns the instance answers (and decides again, and
            // audits).
            let mut req = match &instance {
                Some(name) => {
                    match forward_if_elsewhere(&chain, (name, target.writes), req, &record).await {
                        Ok(req) => req,
                        Err(answer) => return *answer,
                    }
                }
                None => req,
            };
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

/// `req` back when this replica answers for `instance`; else the owner's answer (or why
/// no replica can answer now), in the request's surface's words.
async fn forward_if_elsewhere(
    chain: &Chain,
    (instance, writes): (&str, bool),
    req: Request,
    record: &Record,
) -> Result<Request, Box<Response>> {
    use crate::api::forward::{pass, Passed};
    let Some(shards) = chain.ctx.tree.shards() else {
        return Ok(req);
    };
    let surface = Surface::of(&req);
    let lookup = |n: &str| chain.ctx.instance(n).ok();
    let forwarding = |replica: &str| {
        record.update(|f| f.forwarded_to = Some(replica.to_string()));
    };
    let forwarder = chain.ctx.forwarder.as_deref();
    // The owner holds a request for a hibernated instance while it wakes.
    let patience = match lookup(instance).is_some_and(|i| i.asleep()) {
        true => chain.ctx.tree.settings().wake_timeout,
        false => std::time::Duration::ZERO,
    };
    match pass(
        forwarder,
        shards,
        lookup,
        instance,
        (req, !writes),
        patience,
        forwarding,
    )
    .await
    {
        Ok(Passed::Here(req)) => Ok(req),
        Ok(Passed::Answered { answer, .. }) => Err(Box::new(answer)),
        Ok(Passed::Misdirected(answer)) => {
            // The forwarding peer sends it on; it audits the request, not this hop.
            forwarding("(the forwarding replica)");
            Err(Box::new(answer))
        }
        Err(e) => {
            // No owner answered: this replica audits the attempt (a write) itself.
            record.update(|f| f.forwarded_to = None);
            Err(Box::new(refusal(surface, &e)))
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

/// What the request is, read from its head (the proxy, the other JSON routes) or its one
/// message (gRPC methods on an instance, REST); a request that cannot be read is answered
/// here, in its surface's words.
async fn resolve(
    chain: &Chain,
    req: Request,
    surface: Surface,
) -> Result<(Request, Target), Response> {
    let refuse = |e: ApiError| refusal(surface, &e);
    match surface {
        Surface::Proxy => proxy_target(&req).map(|t| (req, t)).map_err(refuse),
        Surface::Grpc => grpc_target(req).await.map_err(refuse),
        Surface::Rest => match rules::http(req.uri().path()) {
            Some(rule) => Ok((req, target(&rule, None))),
            None => rest_target(chain, req).await,
        },
    }
}

fn proxy_target(req: &Request) -> Result<Target, ApiError> {
    let (name, on) =
        proxied(req.uri().path()).ok_or_else(|| ApiError::NotFound("not a proxied path".into()))?;
    let watching = super::watching(req);
    let r = rules::proxy(req.method(), on, watching);
    Ok(Target {
        need: r.need,
        on: On::Instance {
            name: name.to_string(),
            field: "instance",
        },
        action: r.action(),
        verb: r.verb.to_string(),
        writes: r.writes(),
        object: (!r.resource.is_empty()).then(|| ObjectRef {
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            api_group: r.api_group.clone(),
            subresource: r.subresource.clone(),
        }),
    })
}

async fn grpc_target(req: Request) -> Result<(Request, Target), ApiError> {
    let path = req.uri().path().to_string();
    let rule =
        rules::grpc(&path).ok_or_else(|| ApiError::NotFound(format!("no gRPC method {path:?}")))?;
    // Kairship's own methods are unary: their one message is read here, bounded, and is all
    // the handler gets. Streams (server reflection) pass as they are.
    let Some(input) = unary_input_of(&path) else {
        return match rule.scope {
            Scope::Instance(_) => Err(ApiError::NotFound(format!("no gRPC method {path:?}"))),
            _ => Ok((req, target(rule, None))),
        };
    };
    let (parts, body) = req.into_parts();
    let frame = grpc_frame::read(body).await?;
    let t = message_target(rule, input, &frame)?;
    Ok((Request::from_parts(parts, Body::from(frame)), t))
}

/// What a gRPC request of `rule` acts on, given its one message `frame` (instance-scoped
/// methods name the instance in it).
fn message_target(rule: &Rule, input: MessageDescriptor, frame: &[u8]) -> Result<Target, ApiError> {
    match rule.scope {
        Scope::Instance(_) => {
            let message = DynamicMessage::decode(input, grpc_frame::message(frame)?)
                .map_err(|e| ApiError::invalid("message", format!("cannot be decoded: {e}")))?;
            Ok(target(rule, Some(&message)))
        }
        _ => Ok(target(rule, None)),
    }
}

async fn rest_target(chain: &Chain, req: Request) -> Result<(Request, Target), Response> {
    let (parts, body) = req.into_parts();
    let refuse = |e: ApiError| refusal(Surface::Rest, &e);
    let bytes = crate::api::body::read_limited(body, MAX_REST_BODY, "the request body")
        .await
        .map_err(refuse)?;
    let (rest_rule, message) = crate::api::transcode::transcode(
        &chain.rest_rules,
        &parts.method,
        parts.uri.path(),
        parts.uri.query(),
        &bytes,
    )
    .map_err(|s| crate::api::answer::rest_failure(&s.into()))?;
    let rule = rules::grpc(&rest_rule.grpc_path).ok_or_else(|| {
        refuse(ApiError::Internal(format!(
            "no rule for {}",
            rest_rule.grpc_path
        )))
    })?;
    let t = target(rule, Some(&message));
    // The bytes go on with the request: a replica that does not own the instance forwards
    // it whole, and the owner transcodes it again.
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(Transcoded {
        grpc_path: rest_rule.grpc_path.clone(),
        output: rest_rule.output.clone(),
        message,
        streaming: rest_rule.streaming,
    });
    Ok((req, t))
}

/// The API's descriptors, decoded once.
fn descriptors() -> Result<&'static prost_reflect::DescriptorPool, ApiError> {
    static POOL: std::sync::OnceLock<Option<prost_reflect::DescriptorPool>> =
        std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        prost_reflect::DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET).ok()
    })
    .as_ref()
    .ok_or_else(|| ApiError::Internal("the API's descriptors do not decode".into()))
}

/// The request message of `path` when it is one of Kairship's methods with one request
/// message (none of them stream requests).
fn unary_input_of(path: &str) -> Option<MessageDescriptor> {
    let (service, method) = path.trim_start_matches('/').split_once('/')?;
    descriptors()
        .ok()?
        .get_service_by_name(service)
        .and_then(|s| s.methods().find(|m| m.name() == method))
        .filter(|m| !m.is_client_streaming())
        .map(|m| m.input())
}

fn target(rule: &Rule, message: Option<&DynamicMessage>) -> Target {
    let read = |field: Option<&'static str>| {
        field
            .zip(message)
            .map(|(f, m)| string_field(m, f))
            .filter(|v| !v.is_empty())
    };
    let on = match rule.scope {
        Scope::Instance(field) => On::Instance {
            name: read(Some(field)).unwrap_or_default(),
            field,
        },
        Scope::Caller => On::Caller,
        Scope::Fleet => On::Fleet,
    };
    let (resource, subresource) = match rule.resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (rule.resource, None),
    };
    Target {
        need: rule.need,
        on,
        action: rule.action(),
        verb: rule.verb.to_string(),
        writes: rule.writes(),
        object: Some(ObjectRef {
            resource: resource.to_string(),
            namespace: read(rule.namespace_field),
            name: read(rule.name_field),
            api_group: rule.api_group.to_string(),
            subresource,
        }),
    }
}

/// What the chain reads of a request before any handler runs, from its head and (for a
/// gRPC method on one instance) its body: for the fuzz target of the chain's parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    pub surface: Surface,
    pub verb: String,
    pub long_running: bool,
    /// The instance the request is decided on, when it names one.
    pub instance: Option<String>,
}

/// Reads `req` (with `body`) as the chain does; a request it cannot read is the caller's
/// error (never INTERNAL). REST bodies are the transcoder's (fuzzed on their own).
pub fn inspect<B>(req: &http::Request<B>, body: &[u8]) -> Result<Inspection, ApiError> {
    let surface = Surface::of(req);
    let mut seen = Inspection {
        surface,
        verb: super::audit::rough_verb(req, surface),
        long_running: super::long_running(req),
        instance: proxied(req.uri().path()).map(|(i, _)| i.to_string()),
    };
    if surface == Surface::Grpc {
        let path = req.uri().path();
        let rule = rules::grpc(path)
            .ok_or_else(|| ApiError::NotFound(format!("no gRPC method {path:?}")))?;
        if let Scope::Instance(_) = rule.scope {
            let input = unary_input_of(path)
                .ok_or_else(|| ApiError::NotFound(format!("no gRPC method {path:?}")))?;
            if let On::Instance { name, field } = message_target(rule, input, body)?.on {
                check_name(field, &name)?;
                seen.instance = Some(name);
            }
        }
    }
    Ok(seen)
}

/// A (dotted) string field of a message; empty when unset.
fn string_field(message: &DynamicMessage, path: &str) -> String {
    let mut current = std::borrow::Cow::Borrowed(message);
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let Some(value) = current.get_field_by_name(part) else {
            return String::new();
        };
        match (value.as_ref(), i + 1 == parts.len()) {
            (Value::String(s), true) => return s.clone(),
            (Value::Message(m), false) => current = std::borrow::Cow::Owned(m.clone()),
            _ => return String::new(),
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_as_the_chain_reads_them() {
        let grpc = |path: &str| {
            http::Request::post(path)
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .body(())
                .expect("request")
        };
        let list = "/kairship.v1alpha1.WorkloadService/ListWorkloads";
        let msg = crate::proto::ListWorkloadsRequest {
            instance: "karmada-1".into(),
            ..Default::default()
        };
        let frame = frame(&prost::Message::encode_to_vec(&msg)).expect("frame");
        let seen = inspect(&grpc(list), &frame).expect("read");
        assert_eq!(seen.instance.as_deref(), Some("karmada-1"));
        assert_eq!(seen.verb, "list");
        for (path, body, code) in [
            (
                list,
                &b"\x00\x00\x00\x00\x05ab"[..],
                tonic::Code::InvalidArgument,
            ),
            (
                list,
                &b"\x01\x00\x00\x00\x00"[..],
                tonic::Code::InvalidArgument,
            ),
            (
                list,
                &b"\x00\x00\x00\x00\x02\x0a\x00"[..],
                tonic::Code::InvalidArgument,
            ),
            (
                "/kairship.v1alpha1.Made/Up",
                &b""[..],
                tonic::Code::NotFound,
            ),
        ] {
            let e = inspect(&grpc(path), body).expect_err(path);
            assert_eq!(e.code(), code, "{path}: {e}");
        }
        let watch = http::Request::get(
            "/apis/kairship.io/v1alpha1/instances/k2/proxy/api/v1/configmaps?watch=true",
        )
        .body(())
        .expect("request");
        let seen = inspect(&watch, b"").expect("read");
        assert_eq!(
            (seen.surface, seen.verb.as_str(), seen.long_running),
            (Surface::Proxy, "watch", true)
        );
        assert_eq!(seen.instance.as_deref(), Some("k2"));
    }

    #[test]
    fn fields_are_read_by_their_dotted_path() {
        let pool = prost_reflect::DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET)
            .expect("descriptors");
        let md = pool
            .get_message_by_name("kairship.v1alpha1.UpdateInstanceRequest")
            .expect("message");
        let json = serde_json::json!({"instance": {"metadata": {"name": "prod-eu"}}});
        let msg = DynamicMessage::deserialize(md, json).expect("message");
        assert_eq!(string_field(&msg, "instance.metadata.name"), "prod-eu");
        assert_eq!(string_field(&msg, "instance.metadata.missing"), "");
        let rule = rules::grpc("/kairship.v1alpha1.InstanceService/UpdateInstance").expect("rule");
        let t = target(rule, Some(&msg));
        assert!(matches!(&t.on, On::Instance { name, .. } if name == "prod-eu"));
        assert!(t.writes);
        assert_eq!(t.object.and_then(|o| o.name).as_deref(), Some("prod-eu"));
    }
}
