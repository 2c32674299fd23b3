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
        let frame = crate::api::chain::grpc_frame::frame(&t.message.encode_to_vec())?;
        let mut call = http::Request::post(t.grpc_path.as_str())
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header("te", "trailers")
            .body(axum::body::Body::from(frame))
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        if let Some(record) = ext.get::<Record>() {
            call.extensions_mut().insert(record.clone());
        }
        // What GetKubeconfig reads of the request as the caller sent it.
        if let Some(reached) = ext.get::<crate::api::kubeconfigs::Reached>() {
            call.extensions_mut().insert(reached.clone());
        }
        if let Some(token) = req.headers().get(http::header::AUTHORIZATION) {
            call.headers_mut()
                .insert(http::header::AUTHORIZATION, token.clone());
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
        if t.streaming {
            return Ok(streamed(body, t.output.clone()));
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

/// A server-streaming method's answer as grpc-gateway writes one: each message a line
/// `{"result": ...}`, and a failure after the start (its gRPC status, in the trailers) a
/// last line `{"error": {"code", "message"}}`, since the HTTP status was sent already.
fn streamed(body: axum::body::Body, output: prost_reflect::MessageDescriptor) -> Response {
    use futures::StreamExt;
    let line = |v: serde_json::Value| Bytes::from(format!("{v}\n"));
    let failure = |code: i32, message: String| serde_json::json!({"error": {"code": code, "message": message}});
    let lines = futures::stream::unfold(
        (body, bytes::BytesMut::new(), false),
        move |(mut body, mut buf, done)| {
            let output = output.clone();
            async move {
                if done {
                    return None;
                }
                loop {
                    if let Some(message) = crate::api::chain::grpc_frame::split(&mut buf) {
                        let out = DynamicMessage::decode(output.clone(), message)
                            .map_err(|e| e.to_string())
                            .and_then(|m| serde_json::to_value(&m).map_err(|e| e.to_string()));
                        let out = match out {
                            Ok(v) => serde_json::json!({"result": v}),
                            Err(e) => failure(tonic::Code::Internal as i32, e),
                        };
                        return Some((line(out), (body, buf, false)));
                    }
                    match body.frame().await {
                        Some(Ok(frame)) => match frame.into_data() {
                            Ok(chunk) => buf.extend_from_slice(&chunk),
                            Err(frame) => {
                                let failed = frame
                                    .trailers_ref()
                                    .and_then(Status::from_header_map)
                                    .filter(|s| s.code() != tonic::Code::Ok);
                                let s = failed?;
                                let out = failure(s.code() as i32, s.message().to_string());
                                return Some((line(out), (body, buf, true)));
                            }
                        },
                        Some(Err(e)) => {
                            let out = failure(tonic::Code::Unavailable as i32, e.to_string());
                            return Some((line(out), (body, buf, true)));
                        }
                        None => return None,
                    }
                }
            }
        },
    );
    let mut resp = Response::new(axum::body::Body::from_stream(
        lines.map(Ok::<_, std::convert::Infallible>),
    ));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-ndjson"),
    );
    resp
}

pub async fn handle(State(rest): State<Arc<Rest>>, req: Request) -> Response {
    let mut answer = match rest.call(req).await {
        Ok(r) => r,
        Err(f) => rest_failure(&f),
    };
    // Every answer is the caller's own (filtered by their roles; a kubeconfig carries
    // their token): no shared cache may keep one.
    answer.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    answer
}
