//! What a request asks, the chain's resolve layer: read once, after fairness admits it and
//! before authorization decides on it, from its head (the proxy, the JSON routes) or its
//! one message (gRPC methods on an instance; REST, transcoded to its gRPC method's
//! message): the rule for it (`rules`), the role it needs, on which instance, and what
//! the audit event says it did. A request that cannot be read is answered here, in its
//! surface's words.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prost_reflect::{DynamicMessage, MessageDescriptor, Value};

use super::audit::{ObjectRef, Record};
use super::rules::{self, Rule, Scope};
use super::{grpc_frame, proxied, refusal, Chain, Surface};
use crate::api::request_info::RequestInfo;
use crate::auth::Role;
use crate::error::{check_name, ApiError};

/// REST bodies beyond this are refused (kube-apiserver's own bound on a request body).
pub const MAX_REST_BODY: usize = 3 * 1024 * 1024;

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

/// What a request asks, for the decision, the route and the audit event: an extension
/// of the request from this layer on.
#[derive(Debug, Clone)]
pub struct Target {
    pub(super) need: Role,
    /// The instance whose role decides, and the field that named it.
    pub(super) on: On,
    pub(super) action: String,
    pub(super) verb: String,
    pub(super) writes: bool,
    pub(super) object: Option<ObjectRef>,
    /// Answered by this replica whoever owns the instance (`Rule::anywhere`).
    pub(super) anywhere: bool,
}

#[derive(Debug, Clone)]
pub enum On {
    Instance { name: String, field: &'static str },
    Caller,
    Fleet,
}

/// The resolve layer: the request's [`Target`] in its extensions, and in its audit record.
pub async fn layer(State(chain): State<Arc<Chain>>, req: Request, next: Next) -> Response {
    let surface = RequestInfo::surface_of(&req);
    let (mut req, target) = match resolve(&chain, req, surface).await {
        Ok(x) => x,
        Err(answer) => return answer,
    };
    if let Some(record) = req.extensions().get::<Record>() {
        record.update(|f| {
            f.verb = target.verb.clone();
            f.writes = target.writes;
            f.object = target.object.clone();
            f.instance = target.instance().map(str::to_string);
        });
    }
    req.extensions_mut().insert(target);
    next.run(req).await
}

impl Target {
    /// The instance whose owner answers, when the fleet is sharded.
    pub fn routed_to(&self) -> Option<&str> {
        self.instance().filter(|_| !self.anywhere)
    }

    /// The instance whose role decides, when it names one.
    pub fn instance(&self) -> Option<&str> {
        match &self.on {
            On::Instance { name, .. } => Some(name),
            _ => None,
        }
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
        anywhere: false,
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
        anywhere: rule.anywhere,
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
        let frame = grpc_frame::frame(&prost::Message::encode_to_vec(&msg)).expect("frame");
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
