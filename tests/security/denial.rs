//! Denial of service without a role or with the smallest one: reading bodies before
//! knowing who sends them, connections held open by headers that never end, watches that
//! take an instance's every stream, metrics any stranger can read and grow.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{with, Demo};

/// A TLS connection to the demo's HTTPS address, speaking HTTP/1.1.
pub(crate) async fn tls(demo: &Demo) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    tls_alpn(demo, b"http/1.1").await
}

/// A TLS connection to the demo's HTTPS address, offering `alpn`.
pub(crate) async fn tls_alpn(
    demo: &Demo,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(demo.ca_pem().as_bytes()) {
        roots.add(cert.expect("ca")).expect("root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(kairship_wire::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let addr = demo.https().trim_start_matches("https://").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS")
}

/// What arrives on `stream` within `within` (until it closes, or the time is up).
pub(crate) async fn read_for<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    within: Duration,
) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
        if got.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Whether the server closes `stream` within `within` (whatever it sends meanwhile).
pub(crate) async fn closed_within<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    within: Duration,
) -> bool {
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_to_end).await.is_ok()
}

/// Finding: REST read up to 3 MiB of body before authenticating. Now a request without a
/// token is refused from its headers, before a byte of its body is sent.
pub async fn a_body_is_not_read_before_authentication(demo: &Demo) {
    let mut s = tls(demo).await;
    let head = "POST /apis/kairship.io/v1alpha1/instances HTTP/1.1\r\nHost: kairship\r\ncontent-type: application/json\r\ncontent-length: 3000000\r\n\r\n";
    s.write_all(head.as_bytes()).await.expect("headers");
    let started = Instant::now();
    let answer = read_for(&mut s, Duration::from_secs(5)).await;
    assert!(
        answer.starts_with("HTTP/1.1 401"),
        "refused before the body, after {:?}: {answer:?}",
        started.elapsed()
    );
    println!(
        "attack: 3 MB announced, no token -> 401 after {:?}, no body sent",
        started.elapsed()
    );
}

/// Finding: a request whose headers never end held its connection for 95 s, until the
/// client gave up. Now the server cuts it after its header-read timeout (10 s). Meanwhile a
/// keep-alive connection that waits longer than that between two requests is not cut (the
/// header timeout once ran while waiting too, and a client reusing such a connection had
/// its request fail).
pub async fn headers_that_never_end_are_cut(demo: &Demo) {
    let patient = async {
        let mut s = tls(demo).await;
        let req = b"GET /healthz HTTP/1.1\r\nHost: kairship\r\n\r\n";
        s.write_all(req).await.expect("first request");
        let first = read_for(&mut s, Duration::from_secs(5)).await;
        assert!(first.starts_with("HTTP/1.1 200"), "first answer: {first:?}");
        tokio::time::sleep(Duration::from_secs(13)).await;
        s.write_all(req)
            .await
            .expect("second request on the same connection");
        let second = read_for(&mut s, Duration::from_secs(5)).await;
        assert!(
            second.contains("HTTP/1.1 200"),
            "a keep-alive connection idle for 13 s was cut: {second:?}"
        );
    };
    let slow = async {
        let mut s = tls(demo).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: kairship\r\nX-Slow: ")
            .await
            .expect("part of a header");
        let started = Instant::now();
        let closed = closed_within(&mut s, Duration::from_secs(30)).await;
        assert!(closed, "the connection was still open after 30 s");
        println!(
            "attack: headers that never end -> connection closed after {:?}",
            started.elapsed()
        );
    };
    tokio::join!(patient, slow);
}

/// Finding: the header timeout did not apply to HTTP/2: a HEADERS frame without
/// END_HEADERS, and nothing after it, was held 40 s (10 s for HTTP/1.1). Now an open
/// header block is timed as an HTTP/1.1 head is.
pub async fn http2_headers_that_never_end_are_cut(demo: &Demo) {
    let mut s = tls_alpn(demo, b"h2").await;
    let frame = |kind: u8, flags: u8, payload: &[u8]| {
        let n = payload.len();
        let mut f = vec![
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
            kind,
            flags,
            0,
            0,
            0,
        ];
        f.push(if kind == 0x4 { 0 } else { 1 });
        f.extend_from_slice(payload);
        f
    };
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS, then HEADERS on stream 1: its block begun (:method GET) and never ended.
    bytes.extend(frame(0x4, 0, &[]));
    bytes.extend(frame(0x1, 0, &[0x82]));
    s.write_all(&bytes).await.expect("half a header block");
    let started = Instant::now();
    // (It was held 40 s before, until the client gave up.)
    let closed = closed_within(&mut s, Duration::from_secs(30)).await;
    assert!(closed, "the HTTP/2 connection was still open after 30 s");
    println!(
        "attack: an HTTP/2 header block that never ends -> connection closed after {:?}",
        started.elapsed()
    );
}

/// Finding: a viewer opening pass-through watches from hundreds of threads made every read
/// of the instance's admin fail. Now each caller holds at most its bound of long-running
/// requests (8 in this demo), the instance at most its share of streams, and reads go on.
pub async fn a_watch_flood_leaves_reads_alone(demo: &Demo) {
    let vera = demo.token("vera", &[]);
    // ConfigMaps are not cached: every one of these watches is passed through. Each runs
    // on its own connection, held until the test is done; an admitted watch may send its
    // head only with its first event, so no answer within a few seconds is an open watch.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut holders = Vec::new();
    for _ in 0..24 {
        let mut s = tls(demo).await;
        let (tx, mut stopped, vera) = (tx.clone(), stopped.clone(), vera.clone());
        holders.push(tokio::spawn(async move {
            let req = format!("GET /apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: kairship\r\nAuthorization: Bearer {vera}\r\n\r\n");
            s.write_all(req.as_bytes()).await.expect("request");
            let head = read_for(&mut s, Duration::from_secs(4)).await;
            let _ = tx.send(head.lines().next().unwrap_or_default().to_string());
            drop(tx);
            let _ = stopped.changed().await;
            drop(s);
        }));
    }
    drop(tx);
    let mut lines = Vec::new();
    while let Some(l) = rx.recv().await {
        lines.push(l);
    }
    let refused = lines
        .iter()
        .filter(|l| l.starts_with("HTTP/1.1 429"))
        .count();
    let open = lines
        .iter()
        .filter(|l| l.is_empty() || l.starts_with("HTTP/1.1 200"))
        .count();
    assert_eq!(open + refused, 24, "unexpected answers: {lines:?}");
    assert!(
        open <= 8 && refused >= 16,
        "{open} watches open, {refused} refused"
    );
    // Meanwhile the admin reads, from the cache and through to the instance.
    let admin = demo.proxy("karmada-1", &demo.admin_token()).await;
    let started = Instant::now();
    for i in 0..40 {
        let path = match i % 2 {
            0 => "/apis/apps/v1/namespaces/default/deployments",
            _ => "/api/v1/namespaces/default/configmaps",
        };
        let req = http::Request::get(path).body(Vec::new()).expect("request");
        admin
            .request_text(req)
            .await
            .unwrap_or_else(|e| panic!("the admin's read {i} of {path} failed: {e}"));
    }
    println!(
        "attack: 24 pass-through watches by one viewer -> {open} open, {refused} refused (429); 40 admin reads meanwhile in {:?}, none failed",
        started.elapsed()
    );
    let _ = stop.send(true);
    for h in holders {
        let _ = h.await;
    }
}

/// Finding: `/metrics` on the HTTPS port was unauthenticated, listed every instance, and
/// grew a label series for any method a stranger invented.
pub async fn metrics_are_not_for_strangers(demo: &Demo) {
    let stranger = demo.client("", "no-such-token").await;
    let get = || {
        http::Request::get("/metrics")
            .body(kube::client::Body::empty())
            .expect("request")
    };
    assert_eq!(stranger.send(get()).await.expect("answer").status(), 401);
    let vera = demo.client("", &demo.token("vera", &[])).await;
    assert_eq!(
        vera.send(get()).await.expect("answer").status(),
        403,
        "a viewer of one instance does not see the fleet's metrics"
    );
    let admin = demo.client("", &demo.admin_token()).await;
    assert_eq!(admin.send(get()).await.expect("answer").status(), 200);
    // An invented method: refused, and no series of its name.
    let mut grpc = tonic::client::Grpc::new(demo.grpc().await);
    for path in ["/kairship.v1alpha1.Made/Up", "/x.Y/invented-by-a-stranger"] {
        grpc.ready().await.expect("ready");
        let e = grpc
            .unary::<_, kairship::proto::Caller, _>(
                with(&demo.admin_token(), kairship::proto::GetCallerRequest {}),
                http::uri::PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .expect_err("no such method");
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    }
    let probes = demo.endpoints["metrics"].as_str().expect("metrics url");
    let addr = probes
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let mut tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("probes port");
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut text = String::new();
    tcp.read_to_string(&mut text).await.expect("metrics");
    assert!(text.contains("kairship_api_requests_total"), "{text}");
    assert!(
        !text.contains("Made/Up") && !text.contains("invented-by-a-stranger"),
        "invented methods are not label values"
    );
    assert!(text.contains("method=\"unknown\""), "{text}");
    println!(
        "attack: /metrics without a role -> 401/403; invented methods -> one 'unknown' series"
    );
}

/// A gRPC call that sends its message and never ends its stream (HTTP/2 END_STREAM never
/// comes) is answered from that one message, for an instance's method as for a fleet's:
/// every method is unary, so nothing waits on the rest of the stream, and the call holds
/// no request slot past its answer.
pub async fn a_grpc_stream_that_never_ends_is_answered(demo: &Demo) {
    use futures::StreamExt;
    use http_body_util::{BodyExt, StreamBody};
    use prost::Message;
    let addr = demo.endpoints["grpc"].as_str().expect("grpc").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("HTTP/2");
    tokio::spawn(conn);
    let calls = [
        (
            "InstanceService/GetInstance",
            kairship::proto::GetInstanceRequest {
                name: "karmada-1".into(),
            }
            .encode_to_vec(),
        ),
        (
            "InstanceService/ListInstances",
            kairship::proto::ListInstancesRequest::default().encode_to_vec(),
        ),
    ];
    for (method, message) in calls {
        let mut frame = vec![0u8];
        frame.extend_from_slice(&u32::try_from(message.len()).expect("len").to_be_bytes());
        frame.extend_from_slice(&message);
        let frames = futures::stream::once(futures::future::ready(
            Ok::<_, std::convert::Infallible>(http_body::Frame::data(bytes::Bytes::from(frame))),
        ))
        .chain(futures::stream::pending());
        let req = http::Request::post(format!("http://{addr}/kairship.v1alpha1.{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("authorization", format!("Bearer {}", demo.admin_token()))
            .body(StreamBody::new(frames))
            .expect("request");
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(10), async {
            let resp = send.send_request(req).await.expect("a response");
            resp.into_body().collect().await.expect("its body")
        })
        .await
        .unwrap_or_else(|_| panic!("{method}: no whole answer within 10 s"));
        let status = answer
            .trailers()
            .and_then(|t| t.get("grpc-status"))
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        assert_eq!(status.as_deref(), Some("0"), "{method}: {answer:?}");
        println!(
            "attack: {method} with a stream that never ends -> answered after {:?}",
            started.elapsed()
        );
    }
}
