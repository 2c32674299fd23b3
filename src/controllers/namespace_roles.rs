//! Kairship's edit role where the workloads live: a RoleBinding `kairship:edit` (the
//! group `kairship:edit` to Kubernetes' `edit`, Karmada's namespaced policies aggregated
//! into it) in every workload namespace of the instance, and in none of its system or
//! execution namespaces (`kairship_wire::roles`), nor in one an operator labels
//! `kairship.io/edit=false` to narrow editors on this instance. Kubernetes' RBAC cannot bind a role
//! everywhere but some namespaces, so this controller binds it namespace by namespace, as
//! namespaces come and go; the member-access policy propagates the same RoleBindings to
//! the members. Applied by the leader, from the instance's namespace cache.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kairship_wire::roles::{Class, Role, EDIT_LABEL, SYSTEM_LABEL};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use std::hash::{Hash, Hasher};

use super::{Action, Controller, ControllerError, Next, Observed, Report, Scope};

/// The RoleBinding's name in each workload namespace.
pub const NAME: &str = "kairship:edit";
/// Marks the RoleBindings this controller keeps (and the member-access policy selects).
pub const LABEL: &str = "kairship.io/role";

/// The workload namespaces last bound, to act only when they change (or at the resync).
#[derive(Default)]
pub struct NamespaceRoles {
    bound: Option<BTreeSet<String>>,
    /// `--controller-resync-secs`, as the last look read it.
    resync: std::time::Duration,
}

/// The instance's namespaces as classified now: to bind in, and the others.
fn classified(scope: &Scope<'_>) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
    let namespaces = scope.namespaces?;
    Some(classify(namespaces.state().iter().map(|n| Namespace {
        name: n.name().to_string(),
        system: n.label(SYSTEM_LABEL) == Some("true"),
        edit_off: n.label(EDIT_LABEL) == Some("false"),
    })))
}

/// What a pass found: the workload namespaces now bound.
pub struct Bound(BTreeSet<String>);

impl Controller for NamespaceRoles {
    const NAME: &'static str = "namespace-roles";
    type Found = Bound;

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, _: &mut Report) -> Next<Bound> {
        let (Some(client), Some((workload, system))) = (
            scope.client.filter(|_| scope.connected).cloned(),
            classified(scope),
        ) else {
            return Next::Idle;
        };
        self.resync = scope.ctx.settings.controller_resync;
        if self.bound.as_ref() == Some(&workload) && !scope.requeued() {
            return Next::Idle;
        }
        let timeout = scope.ctx.settings.instance_call_timeout;
        Next::Start(Box::pin(async move {
            ControllerError::instance_call(
                "binding Kairship's edit role",
                timeout,
                ensure(&client, &workload, &system),
            )
            .await?;
            Ok(Bound(workload))
        }))
    }

    fn record(&mut self, found: Bound, _: &mut Report) -> Action {
        self.bound = Some(found.0);
        Action::requeue(self.resync)
    }

    /// The workload namespaces: a new one is bound at once.
    fn watches(&self, scope: &Scope<'_>, _: &Observed, key: &mut dyn Hasher) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        classified(scope).map(|(workload, _)| workload).hash(&mut h);
        key.write_u64(h.finish());
    }
}

/// A namespace as the controller sees it.
pub struct Namespace {
    pub name: String,
    /// Labelled a system namespace.
    pub system: bool,
    /// Labelled to keep Kairship's edit role out.
    pub edit_off: bool,
}

/// The namespaces to bind editors in, and the others (system, execution, narrowed).
pub fn classify(
    namespaces: impl Iterator<Item = Namespace>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut bound, mut other) = (BTreeSet::new(), BTreeSet::new());
    for n in namespaces {
        match Class::of(Some(&n.name), n.system) {
            Class::Workload if !n.edit_off => bound.insert(n.name),
            _ => other.insert(n.name),
        };
    }
    (bound, other)
}

/// The RoleBinding for `namespace`.
pub fn binding(namespace: &str) -> RoleBinding {
    let mut rb = RoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "edit".into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Group".into(),
            name: Role::Edit.group().into(),
            namespace: None,
        }]),
        ..Default::default()
    };
    rb.metadata.name = Some(NAME.into());
    rb.metadata.namespace = Some(namespace.into());
    rb.metadata.labels = Some(
        [
            (LABEL.to_string(), Role::Edit.as_str().to_string()),
            ("app.kubernetes.io/managed-by".into(), "kairship".into()),
        ]
        .into(),
    );
    rb
}

fn terminating(s: &kube::core::Status) -> bool {
    s.code == 403 && s.message.contains("being terminated")
}

/// Creates the RoleBinding where a workload namespace lacks it and deletes it from the
/// others (a namespace labelled a system namespace after it was bound).
async fn ensure(
    client: &kube::Client,
    workload: &BTreeSet<String>,
    system: &BTreeSet<String>,
) -> Result<(), kube::Error> {
    let all: Api<RoleBinding> = Api::all(client.clone());
    let listed = all
        .list(&ListParams::default().labels(&format!("{LABEL}={}", Role::Edit.as_str())))
        .await?;
    let have: BTreeSet<String> = listed
        .items
        .iter()
        .filter(|rb| rb.metadata.name.as_deref() == Some(NAME))
        .filter_map(|rb| rb.metadata.namespace.clone())
        .collect();
    for ns in workload.difference(&have) {
        let api: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
        match api.create(&PostParams::default(), &binding(ns)).await {
            Ok(_) => {}
            // Bound meanwhile, or the namespace is going away.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 || terminating(&s) => {}
            Err(e) => return Err(e),
        }
    }
    for ns in system.intersection(&have) {
        let api: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
        match api.delete(NAME, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_workload_namespaces_are_bound() {
        let (workload, other) = classify(
            [
                ("default", false, false),
                ("shop", false, false),
                ("payments", true, false),
                ("ledger", false, true),
                ("karmada-system", false, false),
                ("karmada-cluster", false, false),
                ("kube-system", false, false),
                ("karmada-es-member1", false, false),
            ]
            .into_iter()
            .map(|(n, system, edit_off)| Namespace {
                name: n.to_string(),
                system,
                edit_off,
            }),
        );
        assert_eq!(
            workload.into_iter().collect::<Vec<_>>(),
            ["default", "shop"]
        );
        for n in ["payments", "ledger", "karmada-es-member1", "kube-system"] {
            assert!(other.contains(n), "{n}");
        }
        let rb = binding("shop");
        assert_eq!(rb.role_ref.name, "edit");
        assert_eq!(
            rb.subjects.and_then(|s| s.first().map(|s| s.name.clone())),
            Some("kairship:edit".into())
        );
    }
}

#[cfg(test)]
mod host_tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::testing::{context, fresh, idle, instance, mock, Look};

    #[tokio::test]
    async fn editors_are_bound_in_workload_namespaces_and_unbound_from_system_ones() {
        let (client, calls) = mock(|call| {
            (call.method == "GET" && call.path.starts_with("/apis/rbac.authorization.k8s.io/v1/rolebindings?"))
                .then(|| {
                    (
                        200,
                        json!({"kind": "RoleBindingList", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {},
                               "items": [
                                   {"metadata": {"name": NAME, "namespace": "shop", "labels": {LABEL: "edit"}},
                                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}},
                                   {"metadata": {"name": NAME, "namespace": "karmada-system", "labels": {LABEL: "edit"}},
                                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}}]}),
                    )
                })
        });
        let workload: BTreeSet<String> = ["shop", "payments"].map(String::from).into();
        let system: BTreeSet<String> = ["karmada-system"].map(String::from).into();
        ensure(&client, &workload, &system).await.expect("bound");
        let writes = calls.writes();
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert_eq!(
            (writes[0].method.as_str(), writes[0].path.as_str()),
            (
                "POST",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/payments/rolebindings?"
            )
        );
        assert_eq!(writes[0].body["metadata"]["name"], NAME);
        assert_eq!(writes[0].body["metadata"]["labels"][LABEL], "edit");
        assert_eq!(writes[1].method, "DELETE");
        assert!(writes[1].path.starts_with(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/karmada-system/rolebindings/"
        ));
    }

    #[tokio::test]
    async fn nothing_before_the_namespaces_are_cached() {
        let (client, calls) = mock(|_| None);
        let look = Look::new(
            instance("team-a"),
            context(client.clone(), Default::default()),
        )
        .connected(client);
        let (observed, mut report) = fresh();
        assert!(idle(&NamespaceRoles::default().reconcile(
            &look.scope(),
            &observed,
            &mut report
        )));
        assert!(calls.writes().is_empty());
    }
}
