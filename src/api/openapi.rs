//! The REST API's OpenAPI 3.0 document, built from the same `google.api.http` rules that
//! route REST (`transcode::rules`), so the document cannot drift from what is served. Schemas
//! are the proto messages as the REST codec writes them (proto3 JSON): lowerCamelCase
//! field names, enums by name, 64-bit integers as strings.

use std::collections::BTreeMap;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{json, Map, Value};

use super::transcode::rules::{self, Rule, RuleError, Segment};

/// Where Kairship serves the document (unauthenticated: it describes the API, no data).
pub const PATH: &str = "/openapi.json";

/// The document for the API compiled into this binary.
pub fn document() -> Result<Value, RuleError> {
    Ok(build(&rules::rules(crate::proto::FILE_DESCRIPTOR_SET)?))
}

/// The document as served and as committed in `ui/openapi.json` (pretty, newline-ended).
pub fn document_text() -> Result<String, RuleError> {
    let mut text = serde_json::to_string_pretty(&document()?).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

fn build(rules: &[Rule]) -> Value {
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    for rule in rules {
        let operation = operation(rule, &mut schemas);
        paths
            .entry(template(rule))
            .or_default()
            .insert(rule.method.as_str().to_ascii_lowercase(), operation);
    }
    schemas.insert("google.rpc.Status".into(), rpc_status());
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Kairship API",
            "version": "v1alpha1",
            "description": "REST transcoding of the kairship.v1alpha1 gRPC services \
                (google.api.http). Bodies and answers are proto3 JSON; errors are \
                google.rpc.Status with grpc-gateway's HTTP statuses.",
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        },
    })
}

/// The rule's path template in OpenAPI's syntax: `{field}` segments and the `:verb`.
pub fn template(rule: &Rule) -> String {
    let mut out = String::new();
    for s in &rule.segments {
        out.push('/');
        match s {
            Segment::Literal(l) => out.push_str(l),
            Segment::Field(f) => out.push_str(&format!("{{{f}}}")),
        }
    }
    if let Some(v) = &rule.verb {
        out.push(':');
        out.push_str(v);
    }
    out
}

fn operation(rule: &Rule, schemas: &mut BTreeMap<String, Value>) -> Value {
    let (service, method) = rule
        .grpc_path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or(("", &rule.grpc_path));
    let service_name = service.rsplit('.').next().unwrap_or(service);
    let bound: Vec<&str> = rule
        .segments
        .iter()
        .filter_map(|s| match s {
            Segment::Field(f) => Some(f.as_str()),
            Segment::Literal(_) => None,
        })
        .collect();
    let mut parameters = Vec::new();
    for path in &bound {
        let schema = field_at(&rule.input, path)
            .map(|f| scalar(&f))
            .unwrap_or_else(|| json!({"type": "string"}));
        parameters.push(json!({"name": path, "in": "path", "required": true, "schema": schema}));
    }
    // Fields neither in the path nor in the body are query parameters (dotted for nested).
    if rule.body != "*" {
        let mut query = Vec::new();
        query_fields(&rule.input, "", &bound, &rule.body, &mut query, 0);
        for (name, schema) in query {
            parameters.push(json!({"name": name, "in": "query", "schema": schema}));
        }
    }
    let mut op = json!({
        "operationId": format!("{service_name}_{method}"),
        "tags": [service_name],
        "parameters": parameters,
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": reference(&rule.output, schemas)}},
            },
            "default": {
                "description": "An error as google.rpc.Status",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/google.rpc.Status"}}},
            },
        },
    });
    let body = match rule.body.as_str() {
        "" => None,
        "*" => Some(rule.input.clone()),
        field => rule
            .input
            .get_field_by_name(field)
            .and_then(|f| match f.kind() {
                Kind::Message(m) => Some(m),
                _ => None,
            }),
    };
    if let Some(md) = body {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": reference(&md, schemas)}},
        });
    }
    op
}

fn field_at(md: &MessageDescriptor, path: &str) -> Option<FieldDescriptor> {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let f = md.get_field_by_name(head)?;
    match (rest, f.kind()) {
        (None, _) => Some(f),
        (Some(rest), Kind::Message(inner)) => field_at(&inner, rest),
        (Some(_), _) => None,
    }
}

fn query_fields(
    md: &MessageDescriptor,
    prefix: &str,
    bound: &[&str],
    body: &str,
    out: &mut Vec<(String, Value)>,
    depth: usize,
) {
    for f in md.fields() {
        let name = format!("{prefix}{}", f.name());
        if bound.contains(&name.as_str()) || (prefix.is_empty() && f.name() == body) {
            continue;
        }
        match f.kind() {
            // Only singular messages can be set field by field (REST's `set_path`).
            Kind::Message(inner) if !f.is_list() && !f.is_map() && depth < 3 => {
                query_fields(&inner, &format!("{name}."), bound, body, out, depth + 1)
            }
            Kind::Message(_) => {}
            _ if f.is_list() => {}
            _ => out.push((name, scalar(&f))),
        }
    }
}

/// A `$ref` to the message's schema, adding it (and what it uses) to `schemas`.
fn reference(md: &MessageDescriptor, schemas: &mut BTreeMap<String, Value>) -> Value {
    let name = md.full_name().to_string();
    if !schemas.contains_key(&name) {
        // Placeholder first, so recursive messages terminate.
        schemas.insert(name.clone(), Value::Null);
        let mut props = Map::new();
        for f in md.fields() {
            let item = match f.kind() {
                Kind::Message(inner) if f.is_map() => {
                    let value = inner
                        .get_field_by_name("value")
                        .map(|v| field_schema(&v, schemas))
                        .unwrap_or_else(|| json!({}));
                    json!({"type": "object", "additionalProperties": value})
                }
                _ => field_schema(&f, schemas),
            };
            let item = match f.is_list() {
                true => json!({"type": "array", "items": item}),
                false => item,
            };
            props.insert(f.json_name().to_string(), item);
        }
        schemas.insert(name.clone(), json!({"type": "object", "properties": props}));
    }
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn field_schema(f: &FieldDescriptor, schemas: &mut BTreeMap<String, Value>) -> Value {
    match f.kind() {
        Kind::Message(m) => reference(&m, schemas),
        _ => scalar(f),
    }
}

fn scalar(f: &FieldDescriptor) -> Value {
    match f.kind() {
        Kind::String => json!({"type": "string"}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            json!({"type": "integer", "format": "int32"})
        }
        Kind::Uint32 | Kind::Fixed32 => json!({"type": "integer", "format": "int64"}),
        // proto3 JSON writes 64-bit integers as strings.
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            json!({"type": "string", "format": "int64"})
        }
        Kind::Uint64 | Kind::Fixed64 => json!({"type": "string", "format": "uint64"}),
        Kind::Double | Kind::Float => json!({"type": "number"}),
        Kind::Bytes => json!({"type": "string", "format": "byte"}),
        Kind::Enum(e) => {
            let names: Vec<String> = e.values().map(|v| v.name().to_string()).collect();
            json!({"type": "string", "enum": names})
        }
        Kind::Message(m) => json!({"type": "object", "description": m.full_name()}),
    }
}

fn rpc_status() -> Value {
    json!({
        "type": "object",
        "properties": {
            "code": {"type": "integer", "format": "int32"},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "@type": {"type": "string"},
                    "fieldViolations": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"field": {"type": "string"}, "description": {"type": "string"}},
                    }},
                },
            }},
        },
    })
}
