//! The live instance readers, published by the instance actors themselves, so requests
//! are routed without waiting on any actor's mailbox: a busy or restarting manager, or a
//! restarting instance actor, never stalls requests to other instances.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use ractor::ActorId;

use crate::cache::reader::InstanceReader;

#[derive(Clone, Default)]
pub struct Routes(Arc<RwLock<HashMap<String, Published>>>);

struct Published {
    actor: ActorId,
    reader: Arc<InstanceReader>,
}

impl Routes {
    /// Publishes `actor`'s reader for `name`. A reader that cannot serve yet does not
    /// displace another actor's: after a manager crash the old actors' caches keep serving
    /// until their successors have synced.
    pub fn publish(&self, name: &str, actor: ActorId, reader: InstanceReader) {
        let mut map = self.0.write();
        let displaces = reader.health().is_ok()
            || map
                .get(name)
                .is_none_or(|p| p.actor == actor || p.reader.health().is_err());
        if displaces {
            map.insert(
                name.to_string(),
                Published {
                    actor,
                    reader: Arc::new(reader),
                },
            );
        }
    }

    /// Keeps only the instances that exist (after the manager relisted them).
    pub fn retain(&self, names: &[String]) {
        self.0.write().retain(|n, _| names.contains(n));
    }

    /// Takes `name` down, unless another actor has published it since.
    pub fn withdraw(&self, name: &str, actor: ActorId) {
        let mut map = self.0.write();
        if map.get(name).is_some_and(|p| p.actor == actor) {
            map.remove(name);
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<InstanceReader>> {
        self.0.read().get(name).map(|p| p.reader.clone())
    }

    pub fn all(&self) -> Vec<Arc<InstanceReader>> {
        self.0.read().values().map(|p| p.reader.clone()).collect()
    }
}
