//! An instance's cache budget: how many objects and bytes Kairship keeps of it, and how
//! large one object may be. An editor of one instance (or a compromised instance) could
//! otherwise fill Kairship's memory with large objects and take every replica, and with it
//! the fleet, down. Over its budget an instance's caches are dropped and their watches
//! stopped; the instance shows Degraded naming the budget, the proxy passes its reads
//! through to it, and no other instance notices.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use parking_lot::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBudget {
    /// Objects of every cached kind together.
    pub max_objects: u64,
    /// Bytes the cached objects keep (their JSON, rows and keys), every kind together.
    pub max_bytes: u64,
    /// Bytes one object may keep (etcd itself stores at most 1.5 MiB per object).
    pub max_object_bytes: u64,
}

impl Default for CacheBudget {
    fn default() -> Self {
        Self {
            max_objects: 250_000,
            max_bytes: 512 * 1024 * 1024,
            max_object_bytes: 3 * 512 * 1024,
        }
    }
}

impl CacheBudget {
    /// This budget with what an Instance's spec sets over it.
    pub fn with(mut self, spec: Option<&crate::crd::CacheBudgetSpec>) -> Self {
        if let Some(s) = spec {
            if let Some(n) = s.max_objects {
                self.max_objects = n;
            }
            if let Some(n) = s.max_bytes {
                self.max_bytes = n;
            }
            if let Some(n) = s.max_object_bytes {
                self.max_object_bytes = n;
            }
        }
        self
    }
}

/// What the stores of one instance keep, against its budget; shared by them.
#[derive(Debug, Default)]
pub struct Meter {
    budget: CacheBudget,
    objects: AtomicI64,
    bytes: AtomicI64,
    over: AtomicBool,
    why: Mutex<Option<String>>,
    /// Wakes the actor at the breach, so the caches stop growing before its next tick.
    breach: tokio::sync::Notify,
}

impl Meter {
    pub fn new(budget: CacheBudget) -> Self {
        Self {
            budget,
            ..Self::default()
        }
    }

    /// Whether an object of `size` bytes may be cached; if not, the instance is over its
    /// budget, saying which object (`what`) broke it.
    pub fn admits(&self, size: usize, what: impl FnOnce() -> String) -> bool {
        if size as u64 <= self.budget.max_object_bytes {
            return true;
        }
        self.exceed(format!(
            "{} keeps {size} bytes, more than the {} one object may keep in the cache",
            what(),
            self.budget.max_object_bytes
        ));
        false
    }

    /// Adds (or with negative numbers removes) objects and bytes; past the budget the
    /// instance is over it.
    pub fn add(&self, objects: i64, bytes: i64) {
        let o = self.objects.fetch_add(objects, Ordering::AcqRel) + objects;
        let b = self.bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        let (o, b) = (o.max(0) as u64, b.max(0) as u64);
        if o > self.budget.max_objects {
            self.exceed(format!(
                "{o} objects, more than its budget of {}",
                self.budget.max_objects
            ));
        } else if b > self.budget.max_bytes {
            self.exceed(format!(
                "{b} bytes of objects, more than its budget of {}",
                self.budget.max_bytes
            ));
        }
    }

    fn exceed(&self, why: String) {
        let mut slot = self.why.lock();
        if slot.is_none() {
            tracing::warn!(reason = %why, "the instance is over its cache budget: its caches are dropped and its reads go to the instance");
            *slot = Some(why);
        }
        self.over.store(true, Ordering::Release);
        // A stored permit when nobody waits yet: the waiter still wakes.
        self.breach.notify_one();
    }

    /// Resolves once the instance is over its budget.
    pub async fn breached(&self) {
        if !self.over() {
            self.breach.notified().await;
        }
    }

    pub fn over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// Why the instance is over its budget, in words, if it is.
    pub fn why(&self) -> Option<String> {
        self.why
            .lock()
            .as_ref()
            .map(|w| format!("over its cache budget: {w}; its reads go to the instance"))
    }

    pub fn budget(&self) -> CacheBudget {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_breach_is_the_one_named() {
        let m = Meter::new(CacheBudget {
            max_objects: 3,
            max_bytes: 1000,
            max_object_bytes: 400,
        });
        m.add(2, 500);
        assert!(!m.over());
        assert!(m.admits(400, || "x".into()));
        assert!(!m.admits(401, || "Deployment default/big".into()));
        assert!(m.over());
        m.add(5, 5000);
        let why = m.why().expect("over");
        assert!(
            why.contains("Deployment default/big keeps 401 bytes"),
            "{why}"
        );
        let m = Meter::new(CacheBudget {
            max_objects: 3,
            max_bytes: 1000,
            max_object_bytes: 400,
        });
        m.add(4, 10);
        assert!(m.why().expect("over").contains("4 objects"));
    }
}
