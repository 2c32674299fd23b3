//! `labelSelector` query parameters: parsing never panics, and a parsed selector can be
//! matched against any object.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(sel) = kairship_wire::selectors::LabelSelector::parse(s) {
        let obj = serde_json::json!({"metadata": {"labels": {"app": "nginx", "tier": "web", "a.b/c": "1"}}});
        let _ = sel.matches(&obj);
        let _ = sel.matches(&serde_json::json!({}));
    }
});
