//! What a rollout would do to each instance it selects, before anything moves: its
//! waves (`plan`), each instance's release now and after, when it may next be changed
//! (`window`), and what blocks it: an External instance (its control plane is its owner's
//! to upgrade), a downgrade, a skipped minor release, an instance that is not Running, an
//! unreadable version or window. Read from the Instance cache by `PlanRollout` and by
//! the rollout runner when it first plans a `FleetRollout`.

use std::collections::BTreeMap;

use super::crd_diff;
use super::plan::{self, Strategy};
use crate::crd::{FleetRolloutSpec, Instance, InstanceClassSpec, InstanceMode, Phase};
use crate::error::ApiError;
use crate::proto;

/// `v1.18.2` as (1, 18, 2).
fn release(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.strip_prefix('v')?.splitn(3, '.');
    let mut next = || parts.next()?.split(['-', '+']).next()?.parse::<u64>().ok();
    Some((next()?, next()?, next()?))
}

fn strategy(spec: &proto::RolloutSpec) -> Strategy {
    match spec.groups.is_empty() {
        false => Strategy::Groups(spec.groups.iter().map(|g| g.instances.clone()).collect()),
        true => Strategy::Progressive {
            canary: spec.canary as usize,
            percentages: match spec.percentages.is_empty() {
                true => vec![100],
                false => spec
                    .percentages
                    .iter()
                    .map(|p| u8::try_from(*p).unwrap_or(u8::MAX))
                    .collect(),
            },
        },
    }
}

/// What `instance` would do in a rollout to `to`, at `now`.
fn planned(
    instance: &Instance,
    to: &str,
    class: Option<&str>,
    ignore_windows: bool,
    now: jiff::Timestamp,
) -> proto::PlannedInstance {
    let name = instance.metadata.name.clone().unwrap_or_default();
    let status = instance.status.as_ref();
    let from = status
        .and_then(|s| s.karmada_version.clone())
        .unwrap_or_default();
    let mut p = proto::PlannedInstance {
        name,
        from_version: from.clone(),
        to_version: to.to_string(),
        ..Default::default()
    };
    if instance.spec.mode != InstanceMode::Managed {
        p.blocking.push(
            "External: its control plane runs elsewhere, and is its owner's to upgrade".into(),
        );
    }
    let phase = status.map(|s| s.phase).unwrap_or_default();
    if phase != Phase::Running {
        p.blocking.push(format!(
            "it is {phase:?}: a rollout changes Running instances only"
        ));
    }
    match (release(&from), release(to)) {
        (_, None) => p
            .blocking
            .push(format!("{to:?} is not a Karmada release (vMAJOR.MINOR.PATCH)")),
        (None, _) => p
            .blocking
            .push("its current release is not known yet (its status reports none)".into()),
        (Some(f), Some(t)) if t < f => p
            .blocking
            .push(format!("a downgrade from {from} to {to}: roll back with the backup taken before the upgrade instead")),
        (Some(f), Some(t)) if t == f => p.notes.push(match class {
            Some(c) => format!("already at {to}: the change is InstanceClass {c:?}'s Karmada spec"),
            None => format!("already at {to}"),
        }),
        (Some(f), Some(t)) if t.0 != f.0 || t.1 > f.1 + 1 => p.blocking.push(format!(
            "from {from} to {to} skips a minor release: Karmada upgrades one minor release at a time"
        )),
        _ => {}
    }
    let next = match (&instance.spec.maintenance_window, ignore_windows) {
        (None, _) | (_, true) => Some(now),
        (Some(w), false) => match w.window() {
            Ok(window) => window.next_open(now),
            Err(e) => {
                p.blocking
                    .push(format!("its maintenance window is unreadable: {e}"));
                None
            }
        },
    };
    p.next_window = next.map(|t| t.to_string()).unwrap_or_default();
    p
}

/// The plan of `spec` over `instances`.
pub fn plan_of(
    spec: &proto::RolloutSpec,
    instances: &[std::sync::Arc<Instance>],
    now: jiff::Timestamp,
) -> Result<proto::RolloutPlan, ApiError> {
    if spec.karmada_version.is_empty() {
        return Err(ApiError::invalid(
            "spec.karmada_version",
            "required: the release the instances move to",
        ));
    }
    let selected: BTreeMap<String, &Instance> = instances
        .iter()
        .filter(|i| {
            spec.class_name.is_empty()
                || i.spec.class_name.as_deref() == Some(spec.class_name.as_str())
        })
        .filter(|i| {
            let labels = i.metadata.labels.clone().unwrap_or_default();
            spec.match_labels
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter_map(|i| Some((i.metadata.name.clone()?, &**i)))
        .collect();
    let names: Vec<String> = selected.keys().cloned().collect();
    let waves = plan::waves(&names, &strategy(spec))
        .map_err(|e| ApiError::invalid("spec", e.to_string()))?;
    let waves: Vec<proto::PlannedWave> = waves
        .iter()
        .map(|w| proto::PlannedWave {
            instances: w
                .iter()
                .filter_map(|n| selected.get(n))
                .map(|i| {
                    let class = Some(spec.class_name.as_str()).filter(|c| !c.is_empty());
                    planned(i, &spec.karmada_version, class, spec.ignore_windows, now)
                })
                .collect(),
        })
        .collect();
    let blocked = waves
        .iter()
        .flat_map(|w| &w.instances)
        .filter(|i| !i.blocking.is_empty())
        .count();
    Ok(proto::RolloutPlan {
        waves,
        blocked: i32::try_from(blocked).unwrap_or(i32::MAX),
        crd_changes: Vec::new(),
    })
}

/// A rollout of a class moves its instances to the class's release: `spec` with the
/// release filled in from `class` (the class `spec.class_name` names, if found).
pub fn with_class(
    mut spec: proto::RolloutSpec,
    class: Option<&InstanceClassSpec>,
) -> Result<proto::RolloutSpec, ApiError> {
    if spec.class_name.is_empty() {
        return Ok(spec);
    }
    let class = class.ok_or_else(|| {
        ApiError::invalid(
            "spec.class_name",
            format!("no InstanceClass {:?}", spec.class_name),
        )
    })?;
    let version = class.karmada_version.clone().ok_or_else(|| {
        ApiError::invalid(
            "spec.class_name",
            format!(
                "InstanceClass {:?} names no karmadaVersion",
                spec.class_name
            ),
        )
    })?;
    if !spec.karmada_version.is_empty() && spec.karmada_version != version {
        return Err(ApiError::invalid(
            "spec.karmada_version",
            format!("a class rollout moves to its class's release ({version}): leave it empty"),
        ));
    }
    // Guardrails that cannot be pushed would fail every instance at its soak.
    crate::crd::guardrail::check(&class.guardrails).map_err(|e| {
        ApiError::invalid(
            "spec.class_name",
            format!("InstanceClass {:?}: {e}", spec.class_name),
        )
    })?;
    spec.karmada_version = version;
    Ok(spec)
}

/// A `FleetRollout`'s spec as the plan reads it.
pub fn spec_of(spec: &FleetRolloutSpec) -> proto::RolloutSpec {
    proto::RolloutSpec {
        karmada_version: spec.karmada_version.clone(),
        match_labels: spec.match_labels.clone().into_iter().collect(),
        canary: spec.canary,
        percentages: spec.percentages.clone(),
        groups: spec
            .groups
            .iter()
            .map(|g| proto::RolloutGroup {
                instances: g.clone(),
            })
            .collect(),
        ignore_windows: spec.ignore_windows,
        class_name: spec.class_name.clone().unwrap_or_default(),
    }
}

/// The pairs of releases (from, to) the plan moves instances between.
pub fn release_pairs(plan: &proto::RolloutPlan) -> std::collections::BTreeSet<(String, String)> {
    plan.waves
        .iter()
        .flat_map(|w| &w.instances)
        .filter(|i| {
            matches!((release(&i.from_version), release(&i.to_version)), (Some(f), Some(t)) if f < t)
        })
        .map(|i| (i.from_version.clone(), i.to_version.clone()))
        .collect()
}

/// What changes in Karmada's CRDs between each pair of releases, or why it is not known.
pub type CrdChanges = BTreeMap<(String, String), Result<Vec<crd_diff::Change>, String>>;

/// Changes shown per instance before the rest are summed up.
const SHOWN: usize = 5;

/// `plan` with the CRD changes of each instance's move: a CRD removed or a version no
/// longer served blocks it; dropped fields and changed defaults are notes; the whole
/// list of each pair of releases is in `plan.crd_changes`.
pub fn with_crd_changes(plan: &mut proto::RolloutPlan, changes: &CrdChanges) {
    for i in plan.waves.iter_mut().flat_map(|w| &mut w.instances) {
        let Some(found) = changes.get(&(i.from_version.clone(), i.to_version.clone())) else {
            continue;
        };
        match found {
            Ok(list) => {
                for c in list.iter().filter(|c| c.blocking()) {
                    i.blocking.push(format!(
                        "{c} in {}: what still uses it breaks",
                        i.to_version
                    ));
                }
                let rest: Vec<String> = list
                    .iter()
                    .filter(|c| !c.blocking())
                    .map(ToString::to_string)
                    .collect();
                if !rest.is_empty() {
                    let mut note = format!(
                        "CRD changes to {}: {}",
                        i.to_version,
                        rest[..rest.len().min(SHOWN)].join("; ")
                    );
                    if rest.len() > SHOWN {
                        note.push_str(&format!(" and {} more", rest.len() - SHOWN));
                    }
                    i.notes.push(note);
                }
            }
            Err(why) => i.notes.push(format!(
                "the CRD changes from {} to {} are not known: {why}",
                i.from_version, i.to_version
            )),
        }
    }
    plan.blocked = i32::try_from(
        plan.waves
            .iter()
            .flat_map(|w| &w.instances)
            .filter(|i| !i.blocking.is_empty())
            .count(),
    )
    .unwrap_or(i32::MAX);
    plan.crd_changes = changes
        .iter()
        .map(|((from, to), found)| proto::ReleaseCrdChanges {
            from_version: from.clone(),
            to_version: to.clone(),
            changes: found
                .as_ref()
                .map(|l| l.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
            unknown: found.as_ref().err().cloned().unwrap_or_default(),
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{InstanceSpec, InstanceStatus, MaintenanceWindowSpec};

    fn instance(
        name: &str,
        mode: InstanceMode,
        version: &str,
        labels: &[(&str, &str)],
    ) -> std::sync::Arc<Instance> {
        let mut i = Instance::new(
            name,
            InstanceSpec {
                mode,
                ..serde_json::from_value(serde_json::json!({})).expect("spec")
            },
        );
        i.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        i.status = Some(InstanceStatus {
            phase: Phase::Running,
            karmada_version: Some(version.into()),
            ..Default::default()
        });
        std::sync::Arc::new(i)
    }

    #[test]
    fn a_plan_names_what_blocks_each_instance() {
        let now: jiff::Timestamp = "2026-12-01T12:00:00Z".parse().expect("time");
        let mut windowed =
            (*instance("e", InstanceMode::Managed, "v1.17.1", &[("env", "prod")])).clone();
        windowed.spec.maintenance_window = Some(MaintenanceWindowSpec {
            days: vec!["Thu".into()],
            start: "02:00".into(),
            duration: "2h".into(),
            time_zone: None,
        });
        let fleet = vec![
            instance("a", InstanceMode::Managed, "v1.17.1", &[("env", "prod")]),
            instance("b", InstanceMode::External, "v1.17.1", &[("env", "prod")]),
            instance("c", InstanceMode::Managed, "v1.18.2", &[("env", "prod")]),
            instance("d", InstanceMode::Managed, "v1.16.0", &[("env", "prod")]),
            std::sync::Arc::new(windowed),
            instance("z", InstanceMode::Managed, "v1.17.1", &[("env", "dev")]),
        ];
        let spec = proto::RolloutSpec {
            karmada_version: "v1.18.2".into(),
            match_labels: [("env".to_string(), "prod".to_string())].into(),
            canary: 1,
            percentages: vec![100],
            ..Default::default()
        };
        let plan = plan_of(&spec, &fleet, now).expect("a plan");
        let all: Vec<&proto::PlannedInstance> =
            plan.waves.iter().flat_map(|w| &w.instances).collect();
        let of = |n: &str| all.iter().find(|i| i.name == n).expect(n);
        assert_eq!(plan.waves.len(), 2);
        assert_eq!(plan.waves[0].instances[0].name, "a", "the canary");
        assert!(all.iter().all(|i| i.name != "z"), "not selected");
        assert!(of("a").blocking.is_empty(), "{:?}", of("a").blocking);
        assert!(of("b").blocking[0].starts_with("External"));
        assert!(of("c").blocking.is_empty() && of("c").notes[0].contains("already"));
        assert!(of("d").blocking[0].contains("skips a minor"));
        assert_eq!(of("e").next_window, "2026-12-03T02:00:00Z");
        assert_eq!(of("a").next_window, "2026-12-01T12:00:00Z");
        assert_eq!(plan.blocked, 2);
        let down = proto::RolloutSpec {
            karmada_version: "v1.17.0".into(),
            ..spec.clone()
        };
        let plan = plan_of(&down, &fleet, now).expect("a plan");
        let a = plan
            .waves
            .iter()
            .flat_map(|w| &w.instances)
            .find(|i| i.name == "a")
            .expect("a");
        assert!(a.blocking[0].contains("downgrade"), "{:?}", a.blocking);
        assert!(plan_of(&proto::RolloutSpec::default(), &fleet, now).is_err());
    }
}
