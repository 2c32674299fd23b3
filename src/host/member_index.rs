//! Which instances hold each member cluster: one watch per process of the metadata of
//! Kairship's ClusterProfiles (labelled with their manager), kept as an index from a
//! member's ID to its profiles, so an instance's controller finds the other instances of
//! its few members in a lookup each, not by reading every profile of the fleet.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::{watcher, WatchStreamExt};
use parking_lot::RwLock;
use tracing::warn;

use super::instance_informer::AbortOnDrop;
use crate::crd::cluster_profile::ClusterProfile;

/// One profile as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    pub name: String,
    pub instance: String,
}

#[derive(Default)]
struct Index {
    by_id: HashMap<String, BTreeSet<Held>>,
    by_instance: HashMap<String, BTreeSet<String>>,
    /// Each profile's member ID and instance, to take it out when it changes or goes.
    of: HashMap<String, (String, String)>,
}

impl Index {
    fn remove(&mut self, name: &str) {
        let Some((id, instance)) = self.of.remove(name) else {
            return;
        };
        if let Some(set) = self.by_id.get_mut(&id) {
            set.retain(|h| h.name != name);
            if set.is_empty() {
                self.by_id.remove(&id);
            }
        }
        // The instance keeps the ID while another of its profiles has it.
        let still = self
            .by_id
            .get(&id)
            .is_some_and(|set| set.iter().any(|h| h.instance == instance));
        if !still {
            if let Some(ids) = self.by_instance.get_mut(&instance) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.by_instance.remove(&instance);
                }
            }
        }
    }

    fn insert(
        &mut self,
        p: &PartialObjectMeta<ClusterProfile>,
        id_label: &str,
        instance_label: &str,
    ) {
        let Some(name) = p.metadata.name.clone() else {
            return;
        };
        self.remove(&name);
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let (Some(id), Some(instance)) = (labels.get(id_label), labels.get(instance_label)) else {
            return;
        };
        self.of.insert(name.clone(), (id.clone(), instance.clone()));
        self.by_instance
            .entry(instance.clone())
            .or_default()
            .insert(id.clone());
        self.by_id.entry(id.clone()).or_default().insert(Held {
            name,
            instance: instance.clone(),
        });
    }
}

/// The index, shared; its watch stops when the last clone goes.
#[derive(Clone)]
pub struct MemberIndex {
    index: Arc<RwLock<Index>>,
    _task: Arc<AbortOnDrop>,
}

impl MemberIndex {
    /// Watches the profiles labelled `selector`, indexing them by the label `id_label`
    /// (their instance in `instance_label`).
    pub fn start(
        host: &kube::Client,
        selector: &str,
        id_label: &'static str,
        instance_label: &'static str,
    ) -> Self {
        let api: Api<PartialObjectMeta<ClusterProfile>> = Api::all(host.clone());
        let index = Arc::new(RwLock::new(Index::default()));
        let stream = watcher(api, watcher::Config::default().labels(selector)).default_backoff();
        let writer = index.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut failing = false;
            // A relist builds a new index, swapped in whole when it completes.
            let mut fresh: Option<Index> = None;
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Init) => fresh = Some(Index::default()),
                    Ok(watcher::Event::InitApply(p)) => {
                        if let Some(f) = fresh.as_mut() {
                            f.insert(&p, id_label, instance_label);
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(f) = fresh.take() {
                            *writer.write() = f;
                        }
                    }
                    Ok(watcher::Event::Apply(p)) => {
                        writer.write().insert(&p, id_label, instance_label)
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        if let Some(name) = p.metadata.name.as_deref() {
                            writer.write().remove(name);
                        }
                    }
                    Err(e) if !failing => {
                        failing = true;
                        warn!(kind = "ClusterProfile", error = %e, "watching the host failed; retrying with backoff");
                        continue;
                    }
                    Err(_) => continue,
                }
                failing = false;
            }
        });
        Self {
            index,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// The profiles of each of `ids`, by ID.
    pub fn holding<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a String>,
    ) -> BTreeMap<String, BTreeSet<Held>> {
        let index = self.index.read();
        ids.into_iter()
            .filter_map(|id| index.by_id.get(id).map(|set| (id.clone(), set.clone())))
            .collect()
    }

    /// The IDs of the members `instance` has profiles of.
    pub fn ids_of(&self, instance: &str) -> BTreeSet<String> {
        self.index
            .read()
            .by_instance
            .get(instance)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<ClusterProfile> {
        use kube::core::PartialObjectMetaExt;
        kube::core::ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
        .into_response_partial()
    }

    fn profile(name: &str, instance: &str, id: &str) -> PartialObjectMeta<ClusterProfile> {
        meta(name, &[("i", instance), ("m", id)])
    }

    #[test]
    fn members_by_id_and_by_instance_follow_changes() {
        let mut ix = Index::default();
        ix.insert(&profile("a-m1", "a", "x"), "m", "i");
        ix.insert(&profile("b-m1", "b", "x"), "m", "i");
        ix.insert(&profile("a-m2", "a", "y"), "m", "i");
        assert_eq!(ix.by_id["x"].len(), 2);
        assert_eq!(
            ix.by_instance["a"],
            BTreeSet::from(["x".to_string(), "y".to_string()])
        );
        // A profile's member changes: the old ID forgets it.
        ix.insert(&profile("b-m1", "b", "z"), "m", "i");
        assert_eq!(ix.by_id["x"].len(), 1);
        assert!(ix.by_instance["b"].contains("z") && !ix.by_instance["b"].contains("x"));
        ix.remove("a-m1");
        assert!(!ix.by_id.contains_key("x"));
        assert_eq!(ix.by_instance["a"], BTreeSet::from(["y".to_string()]));
        ix.remove("a-m2");
        assert!(!ix.by_instance.contains_key("a"));
        // Without the labels, nothing is indexed.
        ix.insert(&meta("unlabelled", &[]), "m", "i");
        assert_eq!(ix.of.len(), 1);
    }
}
