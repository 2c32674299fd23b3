//! Read-your-writes for reads served from the cache: the proxy records the
//! resourceVersion each write through it produced, per kind, and a cached read of that
//! kind waits (briefly) until the cache has seen it. kube-apiserver's reads without a
//! resourceVersion are consistent; without this, a LIST right after a create through
//! Kairship could miss the object.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::caches::Kind;

#[derive(Clone, Default)]
pub struct WriteMarks(Arc<Mutex<BTreeMap<Kind, u64>>>);

impl WriteMarks {
    pub fn record(&self, kind: Kind, rv: u64) {
        let mut m = self.0.lock();
        let e = m.entry(kind).or_insert(0);
        *e = (*e).max(rv);
    }

    /// The newest version a write of `kind` through Kairship produced (0: none).
    pub fn get(&self, kind: Kind) -> u64 {
        self.0.lock().get(&kind).copied().unwrap_or(0)
    }
}
