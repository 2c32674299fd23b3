//! The static token file (`token,user,uid,"group1,group2"` per line): never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = kairship::auth::token_file::parse(s, "fuzz");
});
