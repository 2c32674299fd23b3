//! Resource quantities from member clusters: parsing never panics, and what parses prints
//! back (decimal and binary forms) to text that parses to the same amount.
#![no_main]
use kairship::quantity::{parse, Milli};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(q) = parse(s) {
        let again: Milli = parse(&q.to_decimal()).expect("decimal form parses");
        assert_eq!(again, q, "decimal round trip of {s:?}");
        let again: Milli = parse(&q.to_binary()).expect("binary form parses");
        assert_eq!(again, q, "binary round trip of {s:?}");
    }
});
