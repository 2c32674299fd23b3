//! A gRPC unary call with an already-encoded request, for REST transcoding.

use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::Status;

#[derive(Default, Clone, Copy)]
struct Raw;

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        let n = src.remaining();
        Ok(Some(src.copy_to_bytes(n)))
    }
}

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

/// `authorization` is the HTTP request's header, passed on as gRPC metadata so the gRPC
/// method authenticates and authorizes the REST caller.
pub async fn unary(
    channel: Channel,
    path: &str,
    request: Bytes,
    authorization: Option<&http::HeaderValue>,
) -> Result<Bytes, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("the gRPC server is not ready: {e}")))?;
    let path =
        http::uri::PathAndQuery::try_from(path).map_err(|e| Status::internal(e.to_string()))?;
    let mut request = tonic::Request::new(request);
    // Audit lines say REST, not gRPC (trusted only from this machine: request::Surface).
    request.metadata_mut().insert(
        crate::api::request::REST_HEADER,
        tonic::metadata::MetadataValue::from_static("rest"),
    );
    if let Some(v) = authorization.and_then(|v| v.to_str().ok()) {
        let v = v
            .parse()
            .map_err(|_| Status::unauthenticated("the authorization header is not valid"))?;
        request.metadata_mut().insert("authorization", v);
    }
    Ok(grpc.unary(request, path, Raw).await?.into_inner())
}
