//! Gives the C allocator's free pages back to the system.
//!
//! glibc's malloc returns freed memory to the system only from the top of each arena. A
//! process that cached many objects and then dropped them (an instance moved to another
//! replica, paused or deleted) keeps those pages resident below its live allocations
//! until `malloc_trim` walks the arenas and releases them with `madvise`.

/// Releases every arena's free pages; true if any were given back. A no-op elsewhere than
/// glibc (musl and the other systems' allocators return memory on their own).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_pages() -> bool {
    // SAFETY: malloc_trim takes no pointers and keeps no state of the caller's; glibc
    // locks each arena while it walks it, as every other allocator call does.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Releases every arena's free pages; true if any were given back. A no-op elsewhere than
/// glibc (musl and the other systems' allocators return memory on their own).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_pages() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    fn resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn freed_pages_below_live_memory_are_given_back() {
        // 64 MiB in 4 KiB blocks, below one block that stays: the freed pages cannot leave
        // from the top of the heap, so only a trim returns them.
        let blocks: Vec<Vec<u8>> = (0..16_384).map(|i| vec![i as u8; 4096]).collect();
        let keep = vec![1u8; 4096];
        drop(blocks);
        let before = resident_kib();
        assert!(super::release_free_pages(), "nothing was given back");
        let after = resident_kib();
        assert!(
            before.saturating_sub(after) >= 32 * 1024,
            "resident {before} KiB before the trim, {after} KiB after"
        );
        assert_eq!(keep[0], 1);
    }
}
