//! Gives the C allocator's free pages back to the system.
//!
//! glibc's malloc returns freed memory to the system only from the top of each arena. A
//! process that cached many objects and then dropped them (an instance moved to another
//! replica, paused or deleted) keeps those pages resident below its live allocations
//! until `malloc_trim` walks the arenas and releases them with `madvise`.
//!
//! It also fixes the size above which blocks are mapped on their own and how much free
//! memory an arena keeps at its top ([`configure`]), and
//! reads the allocator's own count of what it holds, so the gap between the bytes
//! in use and the resident memory (fragmentation) can be watched.

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

/// Above this size, each allocation is its own mapping, given back to the system when
/// freed. glibc's default starts at the same 128 KiB but raises itself to the largest
/// block freed so far (up to 32 MiB): after a cache's first list pages (~450 KiB each) or
/// one large LIST answer, every buffer that size lands among the cached objects and
/// leaves holes there that stay resident. Fixed, a cache filled by its first list keeps
/// 1,323 B resident per 904-byte Deployment instead of 1,499 (`cache_resident`).
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// Free memory at the top of an arena beyond this is given back to the system. glibc's
/// default is 128 KiB once the mmap threshold is fixed (it slides with it otherwise):
/// then each LIST answer's buffers, freed at the top, were given back and mapped again by
/// the next request. A label-selected LIST of 1,000 Deployments took 189 page faults
/// (1.86 ms) and a LIST of 100,000 took 18,966; at 1 MiB, 2 (0.96 ms) and 200, resident
/// memory within 1% (`cache_resident`, 2026-11-29). At 4 MiB the faults were the same and
/// a churned cache kept up to 10% more: each arena keeps that much at its top.
pub const TRIM_THRESHOLD: usize = 1024 * 1024;

/// Sets the allocator's options for a long-lived process holding many small objects
/// (see [`MMAP_THRESHOLD`] and [`TRIM_THRESHOLD`]), each unless `GLIBC_TUNABLES` already
/// sets it. Call first, before any thread starts. True if every option was set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn configure() -> bool {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let mut all = true;
    for (tunable, option, value) in [
        ("mmap_threshold", libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        ("trim_threshold", libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD),
    ] {
        if tunables.contains(tunable) {
            all = false;
            continue;
        }
        let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt takes two integers and keeps no pointer; glibc locks the main
        // arena while it sets the option.
        all &= unsafe { libc::mallopt(option, value) == 1 };
    }
    all
}

/// Sets the allocator's options; a no-op elsewhere than glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn configure() -> bool {
    false
}

/// What the C allocator holds, by its own count (every arena and mapped chunk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Bytes handed out and not yet freed.
    pub allocated: u64,
    /// Bytes freed but kept in the arenas (resident unless trimmed or never touched).
    pub free: u64,
}

/// The allocator's count; `None` elsewhere than glibc.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn stats() -> Option<Stats> {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct by value; glibc
    // locks each arena while it sums it.
    let m = unsafe { libc::mallinfo2() };
    let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
    Some(Stats {
        allocated: n(m.uordblks).saturating_add(n(m.hblkhd)),
        free: n(m.fordblks),
    })
}

/// The allocator's count; `None` elsewhere than glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn stats() -> Option<Stats> {
    None
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// The tests measure the whole process: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

    #[test]
    fn a_block_above_the_threshold_is_given_back_when_freed() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(super::configure(), "mallopt refused the threshold");
        // A large block freed (glibc's default would raise its threshold to its size),
        // then many just above the threshold below a block that stays: each is a mapping
        // of its own, so freeing them returns their pages at once, with no trim.
        drop(vec![1u8; 8 << 20]);
        let before = resident_kib();
        let blocks: Vec<Vec<u8>> = (0..128)
            .map(|i| vec![i as u8; super::MMAP_THRESHOLD + 4096])
            .collect();
        let keep = vec![1u8; 4096];
        let during = resident_kib();
        drop(blocks);
        let after = resident_kib();
        assert!(
            during >= before + 16 * 1024,
            "{before} KiB before, {during} KiB with 16 MiB more"
        );
        assert!(
            after + 12 * 1024 <= during,
            "{during} KiB with the blocks, {after} KiB after freeing them"
        );
        assert_eq!(keep[0], 1);
    }

    fn minor_faults() -> u64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // After the command's name: state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(7)?.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn memory_freed_at_the_top_is_kept_for_the_next_request() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(super::configure(), "mallopt refused an option");
        // 768 KiB in 16 KiB blocks (a LIST answer's pieces), freed, then asked for again:
        // under the trim threshold the pages stay, so the second round touches no new one.
        let round = || -> Vec<Vec<u8>> { (0..48).map(|_| vec![1u8; 16 * 1024]).collect() };
        drop(round());
        let before = minor_faults();
        let again = round();
        let faults = minor_faults().saturating_sub(before);
        assert!(
            faults < 64,
            "{faults} page faults to allocate again the 768 KiB just freed (192 if it was given back)"
        );
        assert_eq!(again.len(), 48);
    }

    #[test]
    fn the_count_follows_what_is_allocated_and_freed() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let before = super::stats().expect("glibc counts").allocated;
        // Small blocks, below the mmap threshold: counted in the arenas.
        let blocks: Vec<Vec<u8>> = (0..4_096).map(|i| vec![i as u8; 1024]).collect();
        let during = super::stats().expect("glibc counts");
        assert!(
            // Other threads of the test harness allocate too: a margin for them.
            during.allocated >= before + 3 * 1024 * 1024,
            "{before} B allocated before, {} B with 4 MiB more",
            during.allocated
        );
        drop(blocks);
        let after = super::stats().expect("glibc counts");
        assert!(after.allocated + 3 * 1024 * 1024 < during.allocated);
    }
}
