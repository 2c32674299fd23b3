//! REST requests transcoded to gRPC messages (method, path, query string, JSON body):
//! never a panic, and every refusal is the caller's error, not an internal one.
#![no_main]
use std::sync::OnceLock;

use kairship::api::transcode::rules::{rules, Rule};
use kairship::api::transcode::transcode;
use libfuzzer_sys::fuzz_target;

fn all_rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| rules(kairship::proto::FILE_DESCRIPTOR_SET).expect("rules"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // method \n path \n query \n body
    let mut parts = s.splitn(4, '\n');
    let method = match parts.next().unwrap_or("") {
        "POST" => http::Method::POST,
        "PUT" => http::Method::PUT,
        "PATCH" => http::Method::PATCH,
        "DELETE" => http::Method::DELETE,
        _ => http::Method::GET,
    };
    let path = parts.next().unwrap_or("/");
    let query = parts.next().filter(|q| !q.is_empty());
    let body = parts.next().unwrap_or("").as_bytes();
    if let Err(status) = transcode(all_rules(), &method, path, query, body) {
        assert_ne!(
            status.code(),
            tonic::Code::Internal,
            "internal error for {method} {path}?{query:?}: {}",
            status.message()
        );
    }
});
