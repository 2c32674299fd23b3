//! One client cut off from the host while both processes live, as a network partition
//! does it: an HTTP hop in front of the host that, while held, answers nothing (requests
//! hang, responses and watch events stop) and keeps each request it was sent; on heal it
//! delivers those requests to the host late, even the ones whose client has given up, as
//! packets still in the network would arrive.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

type Reply = http::Response<UnsyncBoxBody<Bytes, std::io::Error>>;

pub struct Partition {
    pub addr: SocketAddr,
    held: watch::Sender<bool>,
    /// Requests sent into the partition and delivered to the host after the heal.
    delivered_late: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// `upstream`: a client of the host (it adds the credentials).
    pub async fn start(upstream: kube::Client) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (held, _) = watch::channel(false);
        let delivered_late = Arc::new(AtomicUsize::new(0));
        let (h, d) = (held.clone(), delivered_late.clone());
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (h, d, upstream) = (h.clone(), d.clone(), upstream.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        forward(req, upstream.clone(), h.clone(), d.clone())
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(conn), svc)
                        .await;
                });
            }
        });
        Self {
            addr,
            held,
            delivered_late,
            task,
        }
    }

    /// A client of the host through this hop, with no credentials of its own.
    pub fn client(&self) -> kube::Client {
        let url = format!("http://{}", self.addr).parse().expect("url");
        kube::Client::try_from(kube::Config::new(url)).expect("client")
    }

    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    pub fn heal(&self) {
        self.held.send_replace(false);
    }

    pub fn delivered_late(&self) -> usize {
        self.delivered_late.load(Ordering::SeqCst)
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn wait_healed(held: &mut watch::Receiver<bool>) {
    while *held.borrow_and_update() {
        if held.changed().await.is_err() {
            return;
        }
    }
}

async fn forward(
    req: http::Request<Incoming>,
    upstream: kube::Client,
    held: watch::Sender<bool>,
    delivered_late: Arc<AtomicUsize>,
) -> Result<Reply, Infallible> {
    let (mut parts, body) = req.into_parts();
    parts.headers.remove(http::header::AUTHORIZATION);
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let request = http::Request::from_parts(parts, kube::client::Body::from(body));
    if *held.borrow() {
        // In the network: it reaches the host after the heal, whether or not anyone waits.
        let mut h = held.subscribe();
        tokio::spawn(async move {
            wait_healed(&mut h).await;
            let _ = upstream.send(request).await;
            delivered_late.fetch_add(1, Ordering::SeqCst);
        });
        return std::future::pending().await;
    }
    let response = match upstream.send(request).await {
        Ok(r) => r,
        Err(e) => {
            let body = http_body_util::Full::new(Bytes::from(e.to_string()))
                .map_err(|never| match never {})
                .boxed_unsync();
            let mut r = http::Response::new(body);
            *r.status_mut() = http::StatusCode::BAD_GATEWAY;
            return Ok(r);
        }
    };
    // A response (a watch's events included) stops while the partition holds.
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().then(move |chunk| {
        let mut h = held.subscribe();
        async move {
            wait_healed(&mut h).await;
            chunk.map(Frame::data).map_err(std::io::Error::other)
        }
    });
    Ok(http::Response::from_parts(
        parts,
        StreamBody::new(stream).boxed_unsync(),
    ))
}
