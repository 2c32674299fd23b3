//! The objects in each planned instance that its move's CRD changes touch (issue 55's
//! "objects in each instance that would be affected"), counted from the instance's
//! caches: every object of a CRD removed or a version no longer served, those that set a
//! field the new release drops (its value is pruned), and those that leave unset a field
//! whose default changes (they take the new one). Kinds Kairship does not cache are not
//! counted; the plan's CRD changes still name them.

use serde_json::Value;

use super::crd_diff::Change;
use super::findings::CrdChanges;
use crate::proto;

/// Whether `v` sets the field at `path` (`spec.placement.clusterAffinity`; `[]` is any
/// item of a list, `*` any value of a map), as the CRD schema walk names fields.
pub fn sets(v: &Value, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return !v.is_null();
    };
    match (*first, v) {
        ("[]", Value::Array(items)) => items.iter().any(|i| sets(i, rest)),
        ("*", Value::Object(m)) => m.values().any(|i| sets(i, rest)),
        (key, Value::Object(m)) => m.get(key).is_some_and(|i| sets(i, rest)),
        _ => false,
    }
}

/// What `change` does to `objects` (of its CRD, in one instance), as a plan note; `None`
/// when it touches none of them.
pub fn note(change: &Change, kind: &str, to: &str, objects: &[Value]) -> Option<String> {
    let count = |f: &dyn Fn(&Value) -> bool| objects.iter().filter(|o| f(o)).count();
    let (n, what) = match change {
        Change::CrdRemoved { .. } => (
            objects.len(),
            format!("would be lost: {to} removes the CRD"),
        ),
        Change::NotServed { version, .. } => (
            objects.len(),
            format!("are served at {version}, which {to} no longer serves"),
        ),
        Change::FieldDropped { field, .. } => {
            let path: Vec<&str> = field.split('.').collect();
            (
                count(&|o| sets(o, &path)),
                format!("set {field}, which {to} drops (its value is pruned)"),
            )
        }
        Change::DefaultChanged { field, .. } => {
            let path: Vec<&str> = field.split('.').collect();
            (
                count(&|o| !sets(o, &path)),
                format!("leave {field} unset and take its new default in {to}"),
            )
        }
    };
    (n > 0).then(|| format!("{n} {kind} object(s) in this instance {what}"))
}

/// The CRD a change is about (`propagationpolicies.policy.karmada.io`).
fn crd_of(change: &Change) -> &str {
    match change {
        Change::CrdRemoved { crd }
        | Change::NotServed { crd, .. }
        | Change::FieldDropped { crd, .. }
        | Change::DefaultChanged { crd, .. } => crd,
    }
}

/// Which CRDs' objects each planned instance's move needs counted: `(instance, crd)`.
pub fn wanted(
    plan: &proto::RolloutPlan,
    changes: &CrdChanges,
) -> std::collections::BTreeSet<(String, String)> {
    plan.waves
        .iter()
        .flat_map(|w| &w.instances)
        .filter_map(|i| {
            let list = changes
                .get(&(i.from_version.clone(), i.to_version.clone()))?
                .as_ref()
                .ok()?;
            Some(list.iter().map(|c| (i.name.clone(), crd_of(c).to_string())))
        })
        .flatten()
        .collect()
}

/// Each instance's objects of each CRD, by `(instance, crd)`, with the kind's name.
pub type Counted = std::collections::BTreeMap<(String, String), (String, Vec<Value>)>;

/// `plan` with a note on each instance for each CRD change that touches its objects;
/// `counted` holds the instances' cached objects of those CRDs (one missing: not cached,
/// not listable by the caller, or the instance not served here).
pub fn with_affected(plan: &mut proto::RolloutPlan, changes: &CrdChanges, counted: &Counted) {
    for i in plan.waves.iter_mut().flat_map(|w| &mut w.instances) {
        let Some(Ok(list)) = changes.get(&(i.from_version.clone(), i.to_version.clone())) else {
            continue;
        };
        for c in list {
            let Some((kind, found)) = counted.get(&(i.name.clone(), crd_of(c).to_string())) else {
                continue;
            };
            if let Some(n) = note(c, kind, &i.to_version, found) {
                i.notes.push(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_is_set_through_lists_and_maps() {
        let pp = json!({"spec": {"preemption": "Always", "resourceSelectors": [{"kind": "Deployment"}, {"name": "x"}],
                                 "overrides": {"a": {"b": 1}}}});
        assert!(sets(&pp, &["spec", "preemption"]));
        assert!(sets(&pp, &["spec", "resourceSelectors", "[]", "name"]));
        assert!(!sets(
            &pp,
            &["spec", "resourceSelectors", "[]", "namespace"]
        ));
        assert!(sets(&pp, &["spec", "overrides", "*", "b"]));
        assert!(!sets(&pp, &["spec", "conflictResolution"]));
        assert!(!sets(
            &json!({"spec": {"preemption": null}}),
            &["spec", "preemption"]
        ));
    }

    #[test]
    fn notes_count_what_each_change_touches() {
        let objs = [
            json!({"spec": {"preemption": "Always"}}),
            json!({"spec": {}}),
        ];
        let dropped = Change::FieldDropped {
            crd: "pp".into(),
            version: "v1alpha1".into(),
            field: "spec.preemption".into(),
        };
        assert_eq!(
            note(&dropped, "PropagationPolicy", "v1.13.0", &objs).as_deref(),
            Some("1 PropagationPolicy object(s) in this instance set spec.preemption, which v1.13.0 drops (its value is pruned)")
        );
        let default = Change::DefaultChanged {
            crd: "pp".into(),
            version: "v1alpha1".into(),
            field: "spec.preemption".into(),
            from: None,
            to: Some(json!("Never")),
        };
        assert!(note(&default, "PropagationPolicy", "v1.13.0", &objs)
            .is_some_and(|n| n.starts_with("1 ")));
        let gone = Change::NotServed {
            crd: "pp".into(),
            version: "v1alpha1".into(),
        };
        assert!(
            note(&gone, "PropagationPolicy", "v1.13.0", &objs).is_some_and(|n| n.starts_with("2 "))
        );
        assert_eq!(note(&gone, "PropagationPolicy", "v1.13.0", &[]), None);
    }
}
