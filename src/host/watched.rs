//! A host resource watched once per process into a reflector store, for readers that
//! only look things up (FleetRollouts, InstanceClasses). A host without the resource's
//! CRD is retried with backoff, logged once per failing stretch.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use tracing::warn;

use super::instance_informer::AbortOnDrop;

/// The host's objects of kind `K`, all namespaces.
pub struct Watched<K: Resource<DynamicType = ()> + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    _task: Arc<AbortOnDrop>,
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for Watched<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            _task: self._task.clone(),
        }
    }
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    pub fn start(host: &kube::Client) -> Self {
        let api: Api<K> = Api::all(host.clone());
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        Self {
            store,
            _task: Arc::new(AbortOnDrop(drive(stream, K::kind(&()).to_string()))),
        }
    }
}

/// Runs a reflector's stream, logging once per failing stretch.
fn drive<T: Send + 'static>(
    stream: impl futures::Stream<Item = Result<T, watcher::Error>> + Send + 'static,
    kind: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut failing = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Err(e) if !failing => {
                    failing = true;
                    warn!(kind = %kind, error = %e, "watching the host failed; retrying with backoff");
                }
                Err(_) => {}
                Ok(_) => failing = false,
            }
        }
    })
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The object named `name` (cluster-scoped kinds).
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.store.get(&reflector::ObjectRef::new(name))
    }
}
