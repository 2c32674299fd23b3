//! REST: the same methods as gRPC over HTTP/JSON, routed by the `google.api.http`
//! annotations of the proto (`api::transcode`). The handler chain has already transcoded
//! the request (to decide on it) and authorized it; REST calls the method in process, on
//! the same gRPC routes with the same authorization, and answers with proto3 JSON, or
//! `google.rpc.Status` JSON with the matching HTTP status.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;
use bytes::{Buf, Bytes};
use http::StatusCode;
use http_body_util::BodyExt;
use prost::Message;
use prost_reflect::{DynamicMessage, SerializeOptions};
use tonic::Status;
use tower::ServiceExt;

use crate::api::answer::{json_response, rest_failure, Failure};
use crate::api::chain::{audit::Record, Authorized, Transcoded};
use crate::error::ApiError;

pub struct Rest {
    /// The gRPC services' routes, without the chain: reached only from behind it.
    grpc: axum::Router,
}

impl Rest {
    pub fn new(grpc: axum::Router) -> Arc<Self> {
        Arc::new(Self { grpc })
    }

    async fn call(&self, req: Request) -> Result<Response, Failure> {
        let ext = req.extensions();
        let authorized = Authorized::of_http(ext)?;
        let t = ext
            .get::<Transcoded>()
            .cloned()
            .ok_or_else(|| ApiError::Internal("the REST request was not transcoded".into()))?;
        let frame = crate::api::chain::authz::frame(&t.message.encode_to_vec())?;
        let mut call = http::Request::post(t.grpc_path.as_str())
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header("te", "trailers")
            .body(axum::body::Body::from(frame))
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        if let Some(record) = ext.get::<Record>() {
            call.extensions_mut().insert(record.clone());
        }
        call.extensions_mut().insert(authorized);
        let answer = match self.grpc.clone().oneshot(call).await {
            Ok(a) => a,
            Err(never) => match never {},
        };
        let (parts, body) = answer.into_parts();
        if let Some(s) = Status::from_header_map(&parts.headers) {
            if s.code() != tonic::Code::Ok {
                return Err(s.into());
            }
        }
        let collected = body
            .collect()
            .await
            .map_err(|e| Status::internal(format!("reading the answer: {e}")))?;
        if let Some(s) = collected.trailers().and_then(Status::from_header_map) {
            if s.code() != tonic::Code::Ok {
                return Err(s.into());
            }
        }
        let mut bytes = collected.to_bytes();
        if bytes.len() < 5 {
            return Err(Status::internal("the answer holds no message").into());
        }
        bytes.advance(5);
        let out = DynamicMessage::decode(t.output.clone(), bytes)
            .map_err(|e| Status::internal(format!("decoding the answer: {e}")))?;
        let mut ser = serde_json::Serializer::new(Vec::new());
        out.serialize_with_options(&mut ser, &SerializeOptions::new())
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(json_response(StatusCode::OK, Bytes::from(ser.into_inner())))
    }
}

pub async fn handle(State(rest): State<Arc<Rest>>, req: Request) -> Response {
    match rest.call(req).await {
        Ok(r) => r,
        Err(f) => rest_failure(&f),
    }
}
