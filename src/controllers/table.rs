//! Every per-instance controller, once, and which of them run (`--controllers`).

use std::collections::BTreeSet;

use super::erased::Erased;
use super::{
    certificates, class_drift, cluster_profiles, clusterpedia, components, guardrails,
    member_access, members_ready, namespace_roles, phase_events, registration, renewal,
    rollout_steps, scheduled_backups, Controller,
};

/// One controller of the table.
pub struct Entry {
    pub name: &'static str,
    pub leader_only: bool,
    pub about: &'static str,
    pub(crate) make: fn() -> Box<dyn Erased>,
}

fn make<C: Controller + Default>() -> Box<dyn Erased> {
    Box::new(C::default())
}

pub(crate) const fn entry<C: Controller + Default>(about: &'static str) -> Entry {
    Entry {
        name: C::NAME,
        leader_only: C::LEADER_ONLY,
        about,
        make: make::<C>,
    }
}

/// The controllers, in the order they look at an instance at each tick.
pub const TABLE: &[Entry] = &[
    entry::<registration::Registration>(
        "keeps the instance's InstanceRegistration in the host, for global management",
    ),
    entry::<namespace_roles::NamespaceRoles>(
        "binds Kairship's edit role in each workload namespace of the instance, and in no system one",
    ),
    entry::<member_access::MemberAccess>(
        "propagates Kairship's roles to the instance's member clusters",
    ),
    entry::<guardrails::Guardrails>(
        "keeps the instance's guardrails (its class's RBAC, admission policies, default policies and quotas) applied",
    ),
    entry::<clusterpedia::Clusterpedia>(
        "registers the instance with Clusterpedia (with --clusterpedia)",
    ),
    entry::<certificates::Certificates>("reads the instance's certificates and their expiry"),
    entry::<renewal::Renewal>("renews a managed instance's leaf certificates before expiry"),
    entry::<components::Components>("checks a managed instance's component pods"),
    entry::<scheduled_backups::ScheduledBackups>(
        "takes the instance's scheduled backups and prunes old ones",
    ),
    entry::<members_ready::MembersReady>(
        "says in the MembersReady condition how many member clusters are Ready",
    ),
    entry::<cluster_profiles::ClusterProfiles>(
        "publishes the member clusters as ClusterProfiles (the SIG Multicluster inventory) in the host, flagging members shared with other instances",
    ),
    entry::<class_drift::ClassDrift>(
        "lists, field by field, where a managed instance differs from its InstanceClass",
    ),
    entry::<rollout_steps::RolloutSteps>(
        "carries out the instance's steps in a FleetRollout: backup, new release, soak, rollback",
    ),
    entry::<phase_events::PhaseEvents>(
        "records a Kubernetes Event on the Instance when its phase changes",
    ),
];

/// Which controllers run, as Karmada's `--controllers` says it: `*` is every controller,
/// `name` turns one on, `-name` turns one off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    on: BTreeSet<&'static str>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--controllers: unknown controller {0:?} (known: {known})", known = known())]
pub struct SelectionError(String);

fn known() -> String {
    TABLE.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

impl Default for Selection {
    fn default() -> Self {
        Self {
            on: TABLE.iter().map(|e| e.name).collect(),
        }
    }
}

impl Selection {
    /// Reads `items` (each may itself be a comma-separated list), in order.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Self, SelectionError> {
        let mut on = BTreeSet::new();
        let named = |n: &str| {
            TABLE
                .iter()
                .find(|e| e.name == n)
                .map(|e| e.name)
                .ok_or_else(|| SelectionError(n.to_string()))
        };
        let words = items
            .iter()
            .flat_map(|i| i.as_ref().split(','))
            .map(str::trim)
            .filter(|w| !w.is_empty());
        for word in words {
            match word.strip_prefix('-') {
                _ if word == "*" => on.extend(TABLE.iter().map(|e| e.name)),
                Some(off) => {
                    on.remove(named(off)?);
                }
                None => {
                    on.insert(named(word)?);
                }
            }
        }
        Ok(Self { on })
    }

    /// The names of the controllers it switches off.
    pub fn off(&self) -> std::collections::BTreeSet<String> {
        TABLE
            .iter()
            .filter(|e| !self.on.contains(e.name))
            .map(|e| e.name.to_string())
            .collect()
    }

    pub fn enables(&self, name: &str) -> bool {
        self.on.contains(name)
    }

    /// The names of the controllers that run.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.on.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists of controllers people read (`kairship run --help`, the chart's values)
    /// name every controller of the table: they are kept by hand, so a test keeps them.
    #[test]
    fn help_and_chart_values_name_every_controller() {
        let help = include_str!("../cli/run.rs");
        let values = include_str!("../../deploy/chart/kairship/values.yaml");
        for e in TABLE {
            assert!(
                help.contains(e.name),
                "--controllers' help omits {}",
                e.name
            );
            assert!(
                values.contains(e.name),
                "the chart's values omit {}",
                e.name
            );
        }
    }

    #[test]
    fn star_minus_one_turns_only_that_one_off() {
        let s = Selection::parse(&["*,-clusterpedia"]).expect("parses");
        assert!(!s.enables("clusterpedia"));
        assert!(s.enables("registration") && s.enables("scheduled-backups"));
        assert_eq!(s.names().count(), TABLE.len() - 1);
    }

    #[test]
    fn names_alone_turn_on_only_those() {
        let s = Selection::parse(&["registration", "components"]).expect("parses");
        assert_eq!(
            s.names().collect::<Vec<_>>(),
            vec!["components", "registration"]
        );
        assert_eq!(
            Selection::parse::<&str>(&[])
                .expect("parses")
                .names()
                .count(),
            0
        );
    }

    #[test]
    fn an_unknown_name_is_refused_and_named() {
        let e = Selection::parse(&["*,-clusterpdia"]).expect_err("refused");
        assert!(e.to_string().contains("\"clusterpdia\""), "{e}");
        assert!(e.to_string().contains("clusterpedia"), "{e}");
    }

    #[test]
    fn names_are_unique() {
        let names: BTreeSet<_> = TABLE.iter().map(|e| e.name).collect();
        assert_eq!(names.len(), TABLE.len());
    }
}
