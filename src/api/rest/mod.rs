//! REST: the same methods as gRPC over HTTP/JSON, routed by the `google.api.http`
//! annotations of the proto. A request becomes the method's request message (path
//! variables, query parameters, body), is sent to the gRPC server, and the answer comes
//! back as proto3 JSON; errors as `google.rpc.Status` JSON with the matching HTTP status.

mod codec;
pub mod rules;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{header, StatusCode};
use prost::Message;
use prost_reflect::{
    DynamicMessage, Kind, MessageDescriptor, ReflectMessage, SerializeOptions, Value,
};
use serde_json::json;
use tonic::transport::Channel;
use tonic::Status;

use crate::api::http::kube_status::json_response;
use crate::error::ApiError;
use rules::Rule;

/// Request bodies beyond this are refused.
const MAX_BODY: usize = 3 * 1024 * 1024;

pub struct Rest {
    rules: Vec<Rule>,
    grpc: Channel,
}

impl Rest {
    /// `grpc` reaches this process's own gRPC server.
    pub fn new(grpc: Channel) -> Result<Arc<Self>, rules::RuleError> {
        Ok(Arc::new(Self {
            rules: rules::rules(crate::proto::FILE_DESCRIPTOR_SET)?,
            grpc,
        }))
    }

    async fn dispatch(&self, req: Request) -> Result<Response, Failure> {
        let (parts, body) = req.into_parts();
        let body = crate::api::body::read_limited(body, MAX_BODY, "the request body").await?;
        let (rule, message) = transcode(
            &self.rules,
            &parts.method,
            parts.uri.path(),
            parts.uri.query(),
            &body,
        )?;
        let answer = codec::unary(
            self.grpc.clone(),
            &rule.grpc_path,
            Bytes::from(message.encode_to_vec()),
            parts.headers.get(header::AUTHORIZATION),
        )
        .await?;
        let out = DynamicMessage::decode(rule.output.clone(), answer)
            .map_err(|e| Status::internal(format!("decoding the answer: {e}")))?;
        let mut ser = serde_json::Serializer::new(Vec::new());
        out.serialize_with_options(&mut ser, &SerializeOptions::new())
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(json_response(StatusCode::OK, Bytes::from(ser.into_inner())))
    }
}

/// A failed REST call: the `google.rpc.Status` to report and the HTTP status it is answered
/// with, which comes from the error itself when the failure is this layer's (a body too
/// large is RESOURCE_EXHAUSTED to gRPC but 413 to HTTP).
pub struct Failure {
    status: Status,
    http: u16,
}

impl From<Status> for Failure {
    fn from(status: Status) -> Self {
        let http = crate::error::http_status_of(status.code());
        Self { status, http }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let http = e.http_status();
        Self {
            status: e.into(),
            http,
        }
    }
}

/// The pure half of a REST call: the rule its method and path match, and the request
/// message built from path variables, query parameters and the JSON body. Every failure
/// is the caller's (not found, invalid argument) except a broken rule set.
pub fn transcode<'r>(
    rules: &'r [rules::Rule],
    method: &http::Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<(&'r rules::Rule, DynamicMessage), Status> {
    let (rule, vars) = rules
        .iter()
        .find_map(|r| r.matches(method, path).map(|v| (r, v)))
        .ok_or_else(|| Status::not_found(format!("no API at {method} {path}")))?;
    let mut msg = DynamicMessage::new(rule.input.clone());
    match rule.body.as_str() {
        "" => {}
        "*" => msg = from_json(&rule.input, body, "body")?,
        field => {
            let fd = rule
                .input
                .get_field_by_name(field)
                .ok_or_else(|| Status::internal(format!("body field {field} missing")))?;
            let Kind::Message(md) = fd.kind() else {
                return Err(Status::internal(format!(
                    "body field {field} is not a message"
                )));
            };
            msg.set_field(&fd, Value::Message(from_json(&md, body, field)?));
        }
    }
    for (path, value) in vars {
        set_path(&mut msg, &path, &value)?;
    }
    if let Some(q) = query {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q)
            .map_err(|e| Status::invalid_argument(format!("query string: {e}")))?;
        for (k, v) in pairs {
            set_path(&mut msg, &k, &v)?;
        }
    }
    Ok((rule, msg))
}

/// A message (encoded as `bytes`) as proto3 JSON, by its full name in the API's descriptors.
pub fn message_json(full_name: &str, bytes: &[u8]) -> Result<serde_json::Value, String> {
    let pool = prost_reflect::DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET)
        .map_err(|e| e.to_string())?;
    let md = pool
        .get_message_by_name(full_name)
        .ok_or_else(|| format!("no message {full_name}"))?;
    let msg = DynamicMessage::decode(md, bytes).map_err(|e| e.to_string())?;
    serde_json::to_value(&msg).map_err(|e| e.to_string())
}

fn from_json(md: &MessageDescriptor, body: &[u8], field: &str) -> Result<DynamicMessage, Status> {
    if body.is_empty() {
        return Ok(DynamicMessage::new(md.clone()));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    DynamicMessage::deserialize(md.clone(), &mut de)
        .map_err(|e| Status::invalid_argument(format!("{field}: {e}")))
}

/// Sets a (nested, dotted) field from its text: path variables and query parameters.
fn set_path(msg: &mut DynamicMessage, path: &str, text: &str) -> Result<(), Status> {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let desc = msg.descriptor();
    let fd = desc
        .get_field_by_name(head)
        .or_else(|| desc.get_field_by_json_name(head))
        .ok_or_else(|| Status::invalid_argument(format!("unknown parameter {path:?}")))?;
    if let Some(rest) = rest {
        let Value::Message(inner) = msg.get_field_mut(&fd) else {
            return Err(Status::invalid_argument(format!("{head} has no fields")));
        };
        return set_path(inner, rest, text);
    }
    let bad = |what: &str| Status::invalid_argument(format!("{path}: {text:?} is not {what}"));
    let value = match fd.kind() {
        Kind::String => Value::String(text.to_string()),
        Kind::Bool => Value::Bool(text.parse().map_err(|_| bad("a boolean"))?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Value::I32(text.parse().map_err(|_| bad("an integer"))?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Value::I64(text.parse().map_err(|_| bad("an integer"))?)
        }
        Kind::Uint32 | Kind::Fixed32 => {
            Value::U32(text.parse().map_err(|_| bad("an unsigned integer"))?)
        }
        Kind::Uint64 | Kind::Fixed64 => {
            Value::U64(text.parse().map_err(|_| bad("an unsigned integer"))?)
        }
        Kind::Enum(e) => Value::EnumNumber(
            e.get_value_by_name(text)
                .map(|v| v.number())
                .or_else(|| text.parse().ok())
                .ok_or_else(|| bad("a known enum value"))?,
        ),
        _ => {
            return Err(Status::invalid_argument(format!(
                "{path} cannot be set from a parameter"
            )))
        }
    };
    // A repeated field takes each occurrence of its parameter (`kinds=A&kinds=B`).
    if fd.is_list() {
        if let Value::List(items) = msg.get_field_mut(&fd) {
            items.push(value);
        }
        return Ok(());
    }
    msg.set_field(&fd, value);
    Ok(())
}

/// `google.rpc.Status` as JSON, with BadRequest field violations when there are any.
pub fn failure_response(f: &Failure) -> Response {
    use tonic_types::StatusExt;
    let s = &f.status;
    let mut details = Vec::new();
    if let Some(br) = s.get_details_bad_request() {
        let violations: Vec<_> = br
            .field_violations
            .iter()
            .map(|v| json!({"field": v.field, "description": v.description}))
            .collect();
        details.push(json!({"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}));
    }
    let body = json!({"code": s.code() as i32, "message": s.message(), "details": details});
    let status = StatusCode::from_u16(f.http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, Bytes::from(body.to_string()))
}

pub async fn handle(State(rest): State<Arc<Rest>>, req: Request) -> Response {
    match rest.dispatch(req).await {
        Ok(r) => r,
        Err(f) => failure_response(&f),
    }
}
