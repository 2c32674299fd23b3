//! The documents themselves: the Swagger 2.0 document (`/openapi/v2`), the OpenAPI v3
//! index (`/openapi/v3`) and one OpenAPI 3.0 document per group-version, each with the
//! operations of its resources and the definitions they reach.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use serde_json::{json, Map, Value};

use super::paths::{group_version_path, operations, Action, PATCH};
use super::{builtin, Catalog, Published};

/// What a PATCH accepts, in the order kube-apiserver's v2 document lists them; custom
/// resources take every one but strategic merge patch, and kubectl picks its patch
/// type by what the document says.
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    STRATEGIC,
    "application/apply-patch+yaml",
];
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// What an operation's body may be.
fn body_types(action: Action, strategic: bool) -> Vec<&'static str> {
    match action {
        Action::Patch => PATCH_TYPES
            .iter()
            .copied()
            .filter(|t| strategic || *t != STRATEGIC)
            .collect(),
        _ => vec!["*/*"],
    }
}

/// `info.version`: the major and minor version the server reports.
fn info() -> Value {
    json!({"title": "Kubernetes", "version": format!("1.{}", crate::server::discovery::MINOR)})
}

fn query_parameter(name: &str) -> (&'static str, &'static str) {
    match name {
        "allowWatchBookmarks" | "watch" | "sendInitialEvents" | "force" | "orphanDependents" => ("boolean", ""),
        "limit" | "timeoutSeconds" | "gracePeriodSeconds" => ("integer", ""),
        "fieldValidation" => ("string", "How the server treats unknown or duplicate fields in the object: Ignore drops them silently, Warn (the default) drops them with a warning per field, Strict fails the request naming each one."),
        "fieldManager" => ("string", "The name of the actor making these changes; required for apply patches."),
        "dryRun" => ("string", "When present (All), the change is checked but not persisted."),
        _ => ("string", ""),
    }
}

/// The list definition of a kind's definition (kube-apiserver publishes one per kind).
fn list_definition(catalog: &Catalog, p: &Published) -> Value {
    let list_kind = format!("{}List", p.gvk.kind);
    json!({
        "description": format!("{list_kind} is a list of {}", p.gvk.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": catalog.definitions[&p.definition]["properties"]["apiVersion"],
            "items": {"type": "array", "items": {"$ref": format!("#/definitions/{}", p.definition)}},
            "kind": catalog.definitions[&p.definition]["properties"]["kind"],
            "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", "default": {}},
        },
        "x-kubernetes-group-version-kind": [{"group": p.gvk.group, "kind": list_kind, "version": p.gvk.version}],
    })
}

/// All definitions, list definitions included, as `#/definitions/...` references.
fn definitions(catalog: &Catalog) -> Map<String, Value> {
    let mut defs = catalog.definitions.clone();
    for p in catalog
        .resources
        .iter()
        .filter(|p| !crate::resources::is_review(&p.def))
    {
        defs.entry(format!("{}List", p.definition))
            .or_insert_with(|| list_definition(catalog, p));
    }
    defs.entry(PATCH.to_string()).or_insert_with(|| {
        json!({"description": "Patch is the body of a PATCH request, in one of the patch formats its content type names.", "type": "object"})
    });
    defs
}

/// A CRD schema as Swagger 2.0 carries it: a node that keeps unknown fields has no
/// `type`, and `nullable` does not exist there.
fn crd_to_v2(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
                o.remove("type");
            }
            o.remove("nullable");
            for (_, child) in o.iter_mut() {
                crd_to_v2(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(crd_to_v2),
        _ => {}
    }
}

/// `/openapi/v2`: every path and every definition.
pub fn v2(catalog: &Catalog) -> Value {
    let mut paths = Map::new();
    for (path, ops) in operations(catalog, None) {
        let mut item = Map::new();
        for o in ops {
            let mut parameters: Vec<Value> = o
                .query
                .iter()
                .map(|q| {
                    let (ty, description) = query_parameter(q);
                    json!({"uniqueItems": true, "type": ty, "description": description, "name": q, "in": "query"})
                })
                .collect();
            if let Some(body) = &o.body {
                parameters.insert(0, json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": format!("#/definitions/{body}")}}));
            }
            let consumes = body_types(o.action, o.strategic);
            item.insert(
                o.method.into(),
                json!({
                    "description": o.description, "consumes": consumes,
                    "produces": ["application/json", "application/yaml"], "schemes": ["https"],
                    "tags": [o.tag], "operationId": o.id, "parameters": parameters,
                    "responses": {
                        "200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{}", o.response)}},
                        "401": {"description": "Unauthorized"},
                    },
                    "x-kubernetes-action": o.action.name(), "x-kubernetes-group-version-kind": o.gvk,
                }),
            );
        }
        item.insert("parameters".into(), path_parameters(&path));
        paths.insert(path, Value::Object(item));
    }
    let mut defs = definitions(catalog);
    for name in &catalog.custom {
        if let Some(d) = defs.get_mut(name) {
            crd_to_v2(d);
        }
    }
    json!({
        "swagger": "2.0",
        "info": info(),
        "paths": paths,
        "definitions": defs,
        "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication", "type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    })
}

fn path_parameters(path: &str) -> Value {
    let mut out = Vec::new();
    if path.contains("{name}") {
        out.push(json!({"name": "name", "in": "path", "required": true, "description": "name of the object", "type": "string", "uniqueItems": true}));
    }
    if path.contains("{namespace}") {
        out.push(json!({"name": "namespace", "in": "path", "required": true, "description": "object name and auth scope, such as for teams and projects", "type": "string", "uniqueItems": true}));
    }
    out.push(json!({"name": "pretty", "in": "query", "description": "If 'true', then the output is pretty printed.", "type": "string", "uniqueItems": true}));
    Value::Array(out)
}

/// The OpenAPI 3.0 document of one group-version (`api/v1`, `apis/apps/v1`), or `None`
/// when nothing is served there.
pub fn v3_group_version(catalog: &Catalog, gv: &str) -> Option<Value> {
    let ops = operations(catalog, Some(gv));
    if ops.is_empty() {
        return None;
    }
    let defs = definitions(catalog);
    let mut wanted = BTreeSet::new();
    let mut paths = Map::new();
    for (path, ops) in ops {
        let mut item = Map::new();
        for o in ops {
            let parameters: Vec<Value> = o
                .query
                .iter()
                .map(|q| {
                    let (ty, description) = query_parameter(q);
                    json!({"name": q, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
                })
                .collect();
            let mut operation = json!({
                "tags": [o.tag], "description": o.description, "operationId": o.id,
                "parameters": parameters,
                "responses": {
                    "200": {"description": "OK", "content": {
                        "application/json": {"schema": {"$ref": format!("#/components/schemas/{}", o.response)}},
                        "application/yaml": {"schema": {"$ref": format!("#/components/schemas/{}", o.response)}},
                    }},
                    "401": {"description": "Unauthorized"},
                },
                "x-kubernetes-action": o.action.name(), "x-kubernetes-group-version-kind": o.gvk,
            });
            wanted.insert(o.response.clone());
            if let Some(body) = &o.body {
                wanted.insert(body.clone());
                let mut types = body_types(o.action, o.strategic);
                types.sort_unstable();
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| {
                        (
                            t.to_string(),
                            json!({"schema": {"$ref": format!("#/components/schemas/{body}")}}),
                        )
                    })
                    .collect();
                operation["requestBody"] = json!({"content": content, "required": true});
            }
            item.insert(o.method.into(), operation);
        }
        let mut params = path_parameters(&path);
        for p in params.as_array_mut().into_iter().flatten() {
            if let Some(o) = p.as_object_mut() {
                o.remove("uniqueItems");
                let ty = o.remove("type").unwrap_or(Value::Null);
                o.insert("schema".into(), json!({"type": ty, "uniqueItems": true}));
            }
        }
        item.insert("parameters".into(), params);
        paths.insert(path, Value::Object(item));
    }
    let mut schemas = Map::new();
    let mut queue: Vec<String> = wanted.into_iter().collect();
    while let Some(name) = queue.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        let Some(def) = defs.get(&name) else { continue };
        let mut def = def.clone();
        to_v3(&mut def, &mut queue);
        if let Some(d) = def.as_object_mut() {
            match name.as_str() {
                builtin::QUANTITY => {
                    d.remove("type");
                    d.insert(
                        "oneOf".into(),
                        json!([{"type": "string"}, {"type": "number"}]),
                    );
                }
                builtin::INT_OR_STRING => {
                    d.remove("type");
                    d.insert(
                        "oneOf".into(),
                        json!([{"type": "integer"}, {"type": "string"}]),
                    );
                }
                _ => {}
            }
        }
        schemas.insert(name, def);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}},
        },
    }))
}

/// Rewrites references into `#/components/schemas/` (noting each target), with a
/// reference that carries siblings wrapped in `allOf` as OpenAPI 3.0 requires.
fn to_v3(v: &mut Value, found: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref").cloned() {
                let name = r.rsplit('/').next().unwrap_or_default().to_string();
                let target = Value::String(format!("#/components/schemas/{name}"));
                found.push(name);
                if o.len() == 1 {
                    o.insert("$ref".into(), target);
                } else {
                    o.remove("$ref");
                    o.insert("allOf".into(), json!([{"$ref": target}]));
                }
                return;
            }
            for (_, child) in o.iter_mut() {
                to_v3(child, found);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| to_v3(c, found)),
        _ => {}
    }
}

/// `/openapi/v3`: where each group-version's document is, with a hash of its content so
/// clients cache it until it changes.
pub fn v3_root(catalog: &Catalog) -> Value {
    // A document is a function of its resources and their definitions (the rest are
    // the fixed built-in ones), so those are hashed rather than each document built.
    let mut hashes: std::collections::BTreeMap<String, DefaultHasher> = Default::default();
    for p in &catalog.resources {
        let h = hashes.entry(group_version_path(p)).or_default();
        (&p.def.plural, &p.version, &p.def.kind, p.def.namespaced).hash(h);
        (p.def.status_subresource, &p.definition).hash(h);
        catalog
            .definitions
            .get(&p.definition)
            .map(Value::to_string)
            .hash(h);
    }
    let paths: Map<String, Value> = hashes
        .into_iter()
        .map(|(gv, h)| {
            let url = format!("/openapi/v3/{gv}?hash={:016X}", h.finish());
            (gv, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}
