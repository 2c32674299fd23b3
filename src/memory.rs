//! Memory a replica gives back. An instance's caches can hold hundreds of MiB; when its
//! actor stops (the instance moved to another replica, was paused or deleted), the heap
//! they freed is released to the system a little later, once for a burst of stops, so a
//! replica's resident memory follows the instances it holds rather than the most it ever
//! held (as after a cold start, when the first replica up briefly owns every instance).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long after the first of a burst of stops the free pages are released: the burst's
/// caches are dropped by then, and one walk of the allocator's arenas serves them all.
const AFTER: Duration = Duration::from_secs(5);

static PENDING: AtomicBool = AtomicBool::new(false);

/// Releases the allocator's free pages [`AFTER`] from now, unless a release is already
/// due. Outside a tokio runtime it does nothing.
pub fn release_soon() {
    if PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        PENDING.store(false, Ordering::Release);
        return;
    };
    runtime.spawn(async {
        tokio::time::sleep(AFTER).await;
        // Stops from now on ask for a release of their own.
        PENDING.store(false, Ordering::Release);
        let started = Instant::now();
        // The walk locks each arena in turn: off the runtime's workers.
        let released = tokio::task::spawn_blocking(kairship_heap::release_free_pages)
            .await
            .unwrap_or(false);
        tracing::debug!(
            released,
            took_ms = started.elapsed().as_millis() as u64,
            "gave the allocator's free pages back"
        );
    });
}
