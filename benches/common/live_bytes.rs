//! Bytes the process holds on the heap right now, counted by the allocator itself (exact,
//! unlike RSS, which the allocator returns to the system lazily). A benchmark that wants
//! it declares `#[global_allocator] static A: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;`.

pub use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
pub use std::alloc::System;

/// Heap bytes in use now.
pub fn now() -> i64 {
    let s = INSTRUMENTED_SYSTEM.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64 + s.bytes_reallocated as i64
}
