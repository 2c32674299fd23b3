//! Who may do what on which instance, from the `InstanceRoleBinding` objects in the host.
//! The decision is a pure function of an index rebuilt whenever a binding changes, so a
//! request costs a few hash lookups and never waits on the host.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use parking_lot::RwLock;

use super::UserInfo;
use crate::crd::{InstanceRoleBinding, Role, Subject, SubjectKind, ALL_INSTANCES};

/// Grants of one subject: the role on every instance, and per named instance.
#[derive(Debug, Default, Clone)]
struct Grants {
    all: Option<Role>,
    named: HashMap<String, Role>,
}

/// The bindings folded by subject.
#[derive(Debug, Default)]
pub struct Index {
    by_subject: HashMap<(SubjectKind, String), Grants>,
}

impl Index {
    pub fn build<'a>(bindings: impl IntoIterator<Item = &'a InstanceRoleBinding>) -> Self {
        let mut by_subject: HashMap<(SubjectKind, String), Grants> = HashMap::new();
        for b in bindings {
            let role = b.spec.role;
            for Subject { kind, name } in &b.spec.subjects {
                let g = by_subject.entry((*kind, name.clone())).or_default();
                for instance in &b.spec.instances {
                    if instance == ALL_INSTANCES {
                        g.all = g.all.max(Some(role));
                    } else {
                        let r = g.named.entry(instance.clone()).or_insert(role);
                        *r = (*r).max(role);
                    }
                }
            }
        }
        Self { by_subject }
    }

    fn subjects<'a>(&'a self, user: &'a UserInfo) -> impl Iterator<Item = &'a Grants> + 'a {
        let as_user = self.by_subject.get(&(SubjectKind::User, user.name.clone()));
        let as_groups = user
            .groups
            .iter()
            .filter_map(|g| self.by_subject.get(&(SubjectKind::Group, g.clone())));
        as_user.into_iter().chain(as_groups)
    }

    /// The strongest role `user` holds on `instance`.
    pub fn role_on(&self, user: &UserInfo, instance: &str) -> Option<Role> {
        self.subjects(user)
            .flat_map(|g| [g.all, g.named.get(instance).copied()])
            .flatten()
            .max()
    }

    /// The strongest role `user` holds on every instance.
    pub fn role_on_all(&self, user: &UserInfo) -> Option<Role> {
        self.subjects(user).filter_map(|g| g.all).max()
    }

    /// Instances named in `user`'s grants (for messages and filtering).
    pub fn named_instances(&self, user: &UserInfo) -> BTreeSet<String> {
        self.subjects(user)
            .flat_map(|g| g.named.keys().cloned())
            .collect()
    }
}

/// The index, kept current by a watch on the host's bindings.
pub struct Bindings {
    index: Arc<RwLock<Arc<Index>>>,
    listed: Arc<std::sync::atomic::AtomicBool>,
    store: Store<InstanceRoleBinding>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Bindings {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Bindings {
    pub fn watch(host: kube::Client) -> Self {
        let api: Api<InstanceRoleBinding> = Api::all(host);
        let (store, writer) = reflector::store();
        let index = Arc::new(RwLock::new(Arc::new(Index::default())));
        let (idx, reader) = (index.clone(), store.clone());
        let listed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let first_list = listed.clone();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        let task = tokio::spawn(async move {
            stream
                .for_each(|event| {
                    if let Err(e) = &event {
                        tracing::warn!(error = %e, "watching InstanceRoleBindings");
                    } else {
                        let state = reader.state();
                        let fresh = Index::build(state.iter().map(|b| &**b));
                        *idx.write() = Arc::new(fresh);
                        // Ready only once the index holds the whole first list.
                        if matches!(event, Ok(watcher::Event::InitDone)) {
                            first_list.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    async {}
                })
                .await
        });
        Self {
            index,
            listed,
            store,
            task,
        }
    }

    pub fn index(&self) -> Arc<Index> {
        self.index.read().clone()
    }

    pub fn is_listed(&self) -> bool {
        self.listed.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::InstanceRoleBindingSpec;

    fn binding(
        role: Role,
        instances: &[&str],
        subjects: &[(SubjectKind, &str)],
    ) -> InstanceRoleBinding {
        InstanceRoleBinding::new(
            "b",
            InstanceRoleBindingSpec {
                role,
                instances: instances.iter().map(|s| s.to_string()).collect(),
                subjects: subjects
                    .iter()
                    .map(|(kind, name)| Subject {
                        kind: *kind,
                        name: name.to_string(),
                    })
                    .collect(),
            },
        )
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn the_strongest_grant_wins_across_users_groups_and_all() {
        let bs = [
            binding(Role::View, &["a"], &[(SubjectKind::User, "alice")]),
            binding(Role::Edit, &["a", "b"], &[(SubjectKind::Group, "dev")]),
            binding(
                Role::Admin,
                &[ALL_INSTANCES],
                &[(SubjectKind::Group, "ops")],
            ),
        ];
        let idx = Index::build(bs.iter());
        assert_eq!(idx.role_on(&user("alice", &[]), "a"), Some(Role::View));
        assert_eq!(idx.role_on(&user("alice", &[]), "b"), None);
        assert_eq!(idx.role_on(&user("alice", &["dev"]), "a"), Some(Role::Edit));
        assert_eq!(
            idx.role_on(&user("bob", &["ops"]), "zzz"),
            Some(Role::Admin)
        );
        assert_eq!(idx.role_on_all(&user("alice", &["dev"])), None);
        assert_eq!(idx.role_on_all(&user("bob", &["ops"])), Some(Role::Admin));
        // A user named like a group gets nothing from the group's bindings.
        assert_eq!(idx.role_on(&user("dev", &[]), "a"), None);
        assert_eq!(
            idx.named_instances(&user("alice", &["dev"]))
                .into_iter()
                .collect::<Vec<_>>(),
            vec!["a", "b"]
        );
    }
}
