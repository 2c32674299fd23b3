//! Where a managed instance differs from its InstanceClass (`crd::class::drift`), field
//! by field, for its status (`status.drift`) and the console's diff. Read from the host's
//! classes and the Instance as watched; no call is made, so it runs at every tick.

use super::{Controller, Scope, Work};
use crate::crd::drift;
use crate::status::Observed;

#[derive(Default)]
pub struct ClassDrift;

impl Controller for ClassDrift {
    const NAME: &'static str = "class-drift";
    const LEADER_ONLY: bool = false;
    type Found = ();

    fn reconcile(&mut self, scope: &Scope<'_>, observed: &mut Observed) -> Option<Work<()>> {
        observed.drift = scope
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
        None
    }

    fn record(&mut self, _found: (), _observed: &mut Observed) {}
}
