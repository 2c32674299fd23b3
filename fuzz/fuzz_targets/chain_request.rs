//! Requests as the handler chain reads them before any handler: method, path and query,
//! headers, and a gRPC message naming its instance. Never a panic, and nothing a caller
//! sends is an internal error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // method \n uri \n header lines (name: value) \n\n body
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let Ok(head) = std::str::from_utf8(head) else {
        return;
    };
    let mut lines = head.lines();
    let Ok(method) = http::Method::from_bytes(lines.next().unwrap_or("GET").as_bytes()) else {
        return;
    };
    let mut req = http::Request::builder()
        .method(method)
        .uri(lines.next().unwrap_or("/"));
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            req = req.header(name.trim(), value.trim());
        }
    }
    let Ok(req) = req.body(()) else {
        return;
    };
    if let Err(e) = kairship::api::chain::resolve::inspect(&req, body) {
        assert_ne!(
            e.code(),
            tonic::Code::Internal,
            "internal error for {} {}: {e}",
            req.method(),
            req.uri()
        );
    }
});
