//! The fault surface of a real fleet, with the simulator admin API's shape
//! (`POST /faults/{instance}` with `{"mode": "down" | "latency"}`, `DELETE` clears):
//! `down` SIGKILLs the instance's karmada-apiserver (clearing starts it again), `latency`
//! stops it with SIGSTOP (clearing continues it). Other modes need the simulator. As the
//! simulator's `POST /clusters/{instance}/{cluster}`: `{"ready": false}` kills the member
//! cluster's kube-apiserver, anything else starts it again.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Json;
use serde_json::{json, Value};

use crate::fleet::RealFleet;

pub fn router(fleet: Arc<RealFleet>) -> axum::Router {
    axum::Router::new()
        .route("/faults/{instance}", post(set).delete(clear))
        .route("/clusters/{instance}/{cluster}", post(member))
        .with_state(fleet)
}

async fn set(
    State(fleet): State<Arc<RealFleet>>,
    Path(instance): Path<String>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mode = body["mode"].as_str().unwrap_or_default().to_string();
    answer(fleet.fault(&instance, Some(&mode)).await)
}

async fn clear(
    State(fleet): State<Arc<RealFleet>>,
    Path(instance): Path<String>,
) -> (StatusCode, Json<Value>) {
    answer(fleet.fault(&instance, None).await)
}

async fn member(
    State(fleet): State<Arc<RealFleet>>,
    Path((instance, cluster)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let ready = body["ready"].as_bool().unwrap_or(true);
    answer(fleet.member_fault(&instance, &cluster, ready).await)
}

fn answer(r: Result<(), crate::Error>) -> (StatusCode, Json<Value>) {
    match r {
        Ok(()) => (StatusCode::OK, Json(json!({"ok": true}))),
        Err(crate::Error::Invalid(m)) => (StatusCode::BAD_REQUEST, Json(json!({"error": m}))),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": e.to_string()})),
        ),
    }
}
