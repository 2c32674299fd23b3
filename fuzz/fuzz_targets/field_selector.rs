//! `fieldSelector` query parameters: parsing never panics, matching works on any object.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(sel) = kairship_wire::selectors::FieldSelector::parse(s) {
        let _ = sel.matches(&serde_json::json!({"metadata": {"name": "x", "namespace": "default"}}));
        let _ = sel.pinned_name();
    }
});
