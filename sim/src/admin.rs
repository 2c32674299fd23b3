//! The simulator's admin API (plain HTTP on loopback): faults per instance as pinned in
//! ../shared/DESIGN.md, plus member-cluster controls and a listing of what runs.
//!
//! - `POST /faults/{instance}` with a [`Fault`]; `DELETE /faults/{instance}` clears it
//!   (`host` addresses the host API).
//! - `POST /clusters/{instance}/{cluster}` with a [`ClusterControl`].
//! - `GET /instances`, `GET /faults`, `GET /healthz`.

use std::net::SocketAddr;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde_json::{json, Value};

use crate::clusters::ClusterControl;
use crate::faults::Fault;
use crate::fleet::Fleet;
use crate::Error;

fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (code, Json(json!({"error": message.into()}))).into_response()
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid body: {e}"))
}

async fn set_fault(
    State(fleet): State<Fleet>,
    Path(instance): Path<String>,
    body: Bytes,
) -> Response {
    if fleet.server(&instance).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            format!("no instance named {instance:?}"),
        );
    }
    let fault: Fault = match parse(&body) {
        Ok(f) => f,
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    match fleet.set_fault(&instance, Some(fault.clone())) {
        Ok(()) => Json(json!({"instance": instance, "fault": fault})).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

async fn clear_fault(State(fleet): State<Fleet>, Path(instance): Path<String>) -> Response {
    match fleet.set_fault(&instance, None) {
        Ok(()) => Json(json!({"instance": instance, "fault": null})).into_response(),
        Err(e) => error(StatusCode::NOT_FOUND, e.to_string()),
    }
}

async fn control_cluster(
    State(fleet): State<Fleet>,
    Path((instance, cluster)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Some(inst) = fleet.instance(&instance) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no instance named {instance:?}"),
        );
    };
    let control: ClusterControl = match parse(&body) {
        Ok(c) => c,
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    if !inst.clusters.control(&cluster, control.clone()) {
        return error(
            StatusCode::NOT_FOUND,
            format!("instance {instance:?} has no cluster named {cluster:?}"),
        );
    }
    Json(json!({"instance": instance, "cluster": cluster, "control": control})).into_response()
}

async fn list_instances(State(fleet): State<Fleet>) -> Json<Value> {
    let items: Vec<Value> = fleet
        .instances()
        .iter()
        .map(|i| {
            json!({
                "name": i.name, "server": i.server.url(), "clusters": i.clusters.names(),
                "fault": i.server.faults.current(), "managedBy": i.managed_by.as_ref().map(|(ns, n)| format!("{ns}/{n}")),
            })
        })
        .collect();
    Json(json!({"host": fleet.host().url(), "instances": items}))
}

async fn list_faults(State(fleet): State<Fleet>) -> Json<Value> {
    let mut out = serde_json::Map::new();
    out.insert("host".into(), json!(fleet.host().faults.current()));
    for i in fleet.instances() {
        out.insert(i.name.clone(), json!(i.server.faults.current()));
    }
    Json(Value::Object(out))
}

pub async fn serve(
    fleet: Fleet,
    port: u16,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/instances", get(list_instances))
        .route("/faults", get(list_faults))
        .route("/faults/{instance}", post(set_fault).delete(clear_fault))
        .route("/clusters/{instance}/{cluster}", post(control_cluster))
        .with_state(fleet);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .map_err(Error::io("binding the simulator admin API"))?;
    let addr = listener
        .local_addr()
        .map_err(Error::io("reading the admin address"))?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "admin API stopped");
        }
    });
    Ok((addr, task))
}
