//! Where a managed instance differs from its InstanceClass (`crd::class::drift`), field
//! by field, for its status (`status.drift`) and the console's diff. Read from the host's
//! classes and the Instance as watched, whenever either changes; no call is made.

use std::hash::{Hash, Hasher};

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::crd::drift;

#[derive(Default)]
pub struct ClassDrift;

impl Controller for ClassDrift {
    const NAME: &'static str = "class-drift";
    const LEADER_ONLY: bool = false;
    type Found = ();

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, report: &mut Report) -> Next<()> {
        let found = scope
            .latest()
            .and_then(|i| {
                let name = i.spec.class_name.as_deref()?;
                let managed = i.spec.managed.as_ref()?;
                let Some(c) = scope.ctx.classes.get(name) else {
                    return Some(vec![crate::crd::ClassDrift {
                        field: String::new(),
                        class: format!("InstanceClass {name:?} not found"),
                        ..Default::default()
                    }]);
                };
                let spec = managed
                    .karmada_spec
                    .clone()
                    .unwrap_or_else(|| serde_json::json!({}));
                let mut d = drift(&c.spec, &spec, managed.overrides.as_ref());
                d.extend(crate::crd::guardrail::drift(
                    &c.spec.guardrails,
                    &i.spec.guardrails,
                ));
                Some(d)
            })
            .unwrap_or_default();
        report.drift = Some(found);
        Next::Wait(Action::await_change())
    }

    fn record(&mut self, _found: (), _: &mut Report) -> Action {
        Action::await_change()
    }

    fn watches(&self, scope: &Scope<'_>, _: &Observed, key: &mut dyn Hasher) {
        let class = scope.latest().and_then(|i| i.spec.class_name.clone());
        let version = class
            .and_then(|c| scope.ctx.classes.get(&c))
            .map(|c| c.metadata.resource_version.clone());
        let mut h = std::collections::hash_map::DefaultHasher::new();
        version.hash(&mut h);
        key.write_u64(h.finish());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::testing::{context, fresh, instance, list, listed, mock, Look};

    #[tokio::test]
    async fn an_instance_whose_class_is_missing_says_so_in_its_drift() {
        let (host, _) = mock(|call| {
            if call
                .path
                .starts_with("/apis/kairship.io/v1alpha1/instances?")
            {
                let mut i = serde_json::to_value(instance("team-m")).unwrap_or_default();
                i["spec"] = json!({"mode": "Managed", "className": "small",
                                   "managed": {"karmadaSpec": {"components": {}}}});
                return list("InstanceList", vec![i]);
            }
            None
        });
        let look = Look::new(instance("team-m"), context(host, Default::default()));
        listed(&look).await;
        let (observed, mut report) = fresh();
        let next = ClassDrift.reconcile(&look.scope(), &observed, &mut report);
        assert!(matches!(next, Next::Wait(a) if a == Action::await_change()));
        let drift = report.drift.clone().unwrap_or_default();
        assert_eq!(drift.len(), 1, "{drift:?}");
        assert_eq!(drift[0].class, "InstanceClass \"small\" not found");
    }
}
