//! Kairship's roles on an instance's member clusters, as Karmada documents unified
//! authentication: Karmada's cluster proxy impersonates the caller on the member, and the
//! members know nothing of Kairship's `kairship:view`, `kairship:edit` and `kairship:admin`
//! groups. The instance already binds those groups (`deploy/instance-rbac.yaml`, which
//! also lets them use the cluster proxy); this controller keeps one
//! ClusterPropagationPolicy that propagates those same bindings to every member, so each
//! member maps the groups as the instance does, members that join later included, and with
//! them the grant that lets Karmada's cluster proxy impersonate Kairship's callers there
//! (Karmada's unified auth allows only users named in bindings, and callers are not). The
//! Instance annotation `kairship.io/member-access: disabled` asks for it to be removed:
//! Karmada keeps what a deleted policy propagated, so the ClusterResourceBindings go
//! too, and with them their Works and the members' copies. Applied by the leader.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use super::{namespace_roles, Action, Controller, ControllerError, Next, Observed, Report, Scope};
use crate::crd::Instance;

pub const ANNOTATION: &str = "kairship.io/member-access";
pub const POLICY: &str = "kairship-member-access";
/// What the policy propagates, all from `deploy/instance-rbac.yaml`: the instance's
/// bindings of Kairship's groups, and the grant that lets Karmada's cluster proxy
/// impersonate Kairship's callers on each member.
pub const TEMPLATES: [(&str, &str); 5] = [
    ("ClusterRoleBinding", "kairship:view"),
    ("ClusterRoleBinding", "kairship:edit"),
    ("ClusterRoleBinding", "kairship:admin"),
    ("ClusterRole", IMPERSONATION),
    ("ClusterRoleBinding", IMPERSONATION),
];
pub const IMPERSONATION: &str = "kairship:member-impersonation";

/// Applies (or removes) the policy when the instance connects or the annotation changes,
/// and every `--controller-resync-secs` after, so a policy changed on the instance is put back.
#[derive(Default)]
pub struct MemberAccess {
    /// What was last applied: the roles (`true`) or their removal.
    applied: Option<bool>,
    /// `--controller-resync-secs`, as the last look read it.
    resync: std::time::Duration,
}

impl Controller for MemberAccess {
    const NAME: &'static str = "member-access";
    type Found = bool;

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, _: &mut Report) -> Next<bool> {
        let Some(client) = scope.client.filter(|_| scope.connected).cloned() else {
            return Next::Idle;
        };
        // The annotation is read from the Instance the actor started with, as before.
        let wanted = wanted(scope.instance);
        self.resync = scope.ctx.settings.controller_resync;
        if self.applied == Some(wanted) && !scope.requeued() {
            return Next::Idle;
        }
        let timeout = scope.ctx.settings.instance_call_timeout;
        Next::Start(Box::pin(async move {
            ensure(&client, wanted, timeout).await.map_err(|e| {
                ControllerError::Failed(format!(
                    "applying Kairship's roles on the member clusters: {e}"
                ))
            })?;
            Ok(wanted)
        }))
    }

    fn record(&mut self, applied: bool, _: &mut Report) -> Action {
        self.applied = Some(applied);
        Action::requeue(self.resync)
    }
}

/// Whether the Instance wants Kairship's roles on its members (the default).
pub fn wanted(instance: &Instance) -> bool {
    instance
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .is_none_or(|v| v != "disabled")
}

/// Karmada's name for a cluster-scoped template's binding (`names.GenerateBindingName`:
/// `<name>-<kind in lowercase>`, `:` becomes `.`).
pub fn binding_name(kind: &str, template: &str) -> String {
    format!("{}-{}", template.replace(':', "."), kind.to_lowercase())
}

/// Karmada's ClusterResourceBindings (not cached).
pub fn bindings() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("work.karmada.io", "v1alpha2", "ClusterResourceBinding"),
        "clusterresourcebindings",
    )
}

/// Karmada's ResourceBindings (cached, but deleted here by name).
fn resource_bindings() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("work.karmada.io", "v1alpha2", "ResourceBinding"),
        "resourcebindings",
    )
}

async fn delete_if_there(api: &Api<DynamicObject>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

fn policies() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(
            "policy.karmada.io",
            "v1alpha1",
            "ClusterPropagationPolicy",
        ),
        "clusterpropagationpolicies",
    )
}

/// The policy: the templates, and the editors' RoleBindings in every workload namespace
/// (`namespace_roles`), to every member cluster.
pub fn policy() -> serde_json::Value {
    let mut selectors: Vec<serde_json::Value> = TEMPLATES
        .iter()
        .map(|(kind, name)| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "name": name}))
        .collect();
    selectors.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "labelSelector": {"matchLabels": {namespace_roles::LABEL: "edit"}},
    }));
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": POLICY, "labels": {"app.kubernetes.io/managed-by": "kairship"}},
        // No cluster affinity: every member, and each one that joins later.
        "spec": {"resourceSelectors": selectors, "placement": {}},
    })
}

#[derive(Debug, thiserror::Error)]
pub enum MemberAccessError {
    #[error("the instance did not answer within {0:?}")]
    Timeout(Duration),
    /// The policy, or a binding Karmada made for it, is still being deleted (its removal
    /// was asked for a moment ago): apply again once Karmada lets it go. A policy applied
    /// while a binding terminates would never get that binding back, since nothing tells
    /// Karmada's detector to look at the template again.
    #[error("{0} is still being deleted")]
    Terminating(String),
    #[error("{0}")]
    Refused(#[from] kube::Error),
}

/// Applies the policy (server-side, so an operator's own fields stay theirs) or removes it.
pub async fn ensure(
    client: &kube::Client,
    wanted: bool,
    timeout: Duration,
) -> Result<(), MemberAccessError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &policies());
    let call = async {
        match wanted {
            true => {
                let claimed: Api<DynamicObject> = Api::all_with(client.clone(), &bindings());
                for (kind, template) in TEMPLATES {
                    let name = binding_name(kind, template);
                    if let Some(crb) = claimed.get_opt(&name).await? {
                        if crb.metadata.deletion_timestamp.is_some() {
                            return Ok(Err(MemberAccessError::Terminating(format!(
                                "ClusterResourceBinding {name}"
                            ))));
                        }
                    }
                }
                let applied = api
                    .patch(
                        POLICY,
                        &PatchParams::apply("kairship").force(),
                        &Patch::Apply(&policy()),
                    )
                    .await?;
                if applied.metadata.deletion_timestamp.is_some() {
                    return Ok(Err(MemberAccessError::Terminating(format!(
                        "the policy {POLICY}"
                    ))));
                }
                Ok(Ok(()))
            }
            false => {
                delete_if_there(&api, POLICY).await?;
                let claimed: Api<DynamicObject> = Api::all_with(client.clone(), &bindings());
                for (kind, template) in TEMPLATES {
                    delete_if_there(&claimed, &binding_name(kind, template)).await?;
                }
                // The editors' RoleBindings' ResourceBindings, in each namespace.
                let name = binding_name("RoleBinding", namespace_roles::NAME);
                let namespaced: Api<DynamicObject> =
                    Api::all_with(client.clone(), &resource_bindings());
                for rb in namespaced.list(&Default::default()).await?.items {
                    if rb.metadata.name.as_deref() != Some(name.as_str()) {
                        continue;
                    }
                    let ns = rb.metadata.namespace.clone().unwrap_or_default();
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), &ns, &resource_bindings());
                    delete_if_there(&api, &name).await?;
                }
                Ok(Ok(()))
            }
        }
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| MemberAccessError::Timeout(timeout))?
        .map_err(MemberAccessError::Refused)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_unless_the_instance_says_disabled() {
        let mut i = Instance::new(
            "a",
            serde_json::from_value(json!({"mode": "External"})).expect("spec"),
        );
        assert!(wanted(&i));
        i.metadata.annotations = Some([(ANNOTATION.to_string(), "disabled".to_string())].into());
        assert!(!wanted(&i));
        let p = policy();
        assert_eq!(
            p["spec"]["resourceSelectors"].as_array().map(Vec::len),
            Some(6)
        );
        assert!(
            p["spec"]["placement"].get("clusterAffinity").is_none(),
            "every member"
        );
    }
}

#[cfg(test)]
mod host_tests {
    use super::*;
    use crate::controllers::testing::{context, fresh, idle, instance, mock, run, Look};

    #[tokio::test]
    async fn the_policy_is_applied_once_connected_and_again_at_the_resync() {
        let (client, calls) = mock(|_| None);
        let settings = crate::context::Settings {
            controller_resync: Duration::from_secs(300),
            ..Default::default()
        };
        let mut look = Look::new(instance("team-a"), context(client.clone(), settings));
        let (observed, mut report) = fresh();
        let mut c = MemberAccess::default();
        assert!(idle(&c.reconcile(&look.scope(), &observed, &mut report)));
        look = look.connected(client);
        let applied = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("applied");
        assert!(applied, "wanted by default");
        assert_eq!(
            c.record(applied, &mut report),
            Action::requeue(Duration::from_secs(300))
        );
        let writes = calls.writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0].method, "PATCH");
        assert!(writes[0].path.starts_with(&format!(
            "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies/{POLICY}?"
        )));
        let selectors = writes[0].body["spec"]["resourceSelectors"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (kind, name) in TEMPLATES {
            assert!(
                selectors
                    .iter()
                    .any(|s| s["kind"] == kind && s["name"] == name),
                "{kind} {name} propagated: {selectors:?}"
            );
        }
        assert!(idle(&c.reconcile(&look.scope(), &observed, &mut report)));
        look.requeued = true;
        assert!(!idle(&c.reconcile(&look.scope(), &observed, &mut report)));
    }

    #[tokio::test]
    async fn switched_off_by_the_annotation_the_policy_and_its_bindings_are_removed() {
        let (client, calls) = mock(|_| None);
        let mut i = instance("team-a");
        i.metadata.annotations = Some([(ANNOTATION.to_string(), "disabled".to_string())].into());
        let look = Look::new(i, context(client.clone(), Default::default())).connected(client);
        let (observed, mut report) = fresh();
        let mut c = MemberAccess::default();
        let applied = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("removed");
        assert!(!applied);
        let deleted: Vec<String> = calls
            .writes()
            .into_iter()
            .filter(|w| w.method == "DELETE")
            .map(|w| w.path)
            .collect();
        assert!(
            deleted.iter().any(|p| p.contains(POLICY))
                && deleted
                    .iter()
                    .any(|p| p.contains("clusterresourcebindings")),
            "{deleted:?}"
        );
    }
}
