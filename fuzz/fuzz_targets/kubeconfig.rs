//! Instance kubeconfigs read from Secrets: parsing and the self-contained check never
//! panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = kairship::actors::instance::connect::parse_kubeconfig(s);
});
