//! REST transcoding, after grpc-gateway: which gRPC method a REST request calls (the
//! `google.api.http` annotations of the proto, read from the embedded descriptors: `rules`)
//! and that method's request message, built from the path's variables, the query string
//! and the JSON body. Pure: the authorization layer transcodes a REST request to decide on
//! it, and REST then calls the method in process.

pub mod rules;

use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value};
use tonic::Status;

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
