//! Global management's webhook: the signature headers and the role event body never
//! panic, whatever they hold.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // timestamp \n signature \n body
    let mut parts = data.splitn(3, |b| *b == b'\n');
    let ts = parts.next().and_then(|p| std::str::from_utf8(p).ok());
    let sig = parts.next().and_then(|p| std::str::from_utf8(p).ok());
    let body = parts.next().unwrap_or_default();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"fuzz-secret");
    let _ = kairship::auth::webhook::verify(&key, ts, sig, body, 1_800_000_000);
    if let Ok(event) = kairship::auth::webhook::parse_event(body) {
        let _ = kairship::auth::webhook::binding_name(&event);
    }
});
