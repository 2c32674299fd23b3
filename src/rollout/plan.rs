//! The waves of a fleet rollout: which instances change in which order, decided once, up
//! front, from the instances it selects and its strategy. A pure function, so the plan a
//! user reads before anything moves is the plan that runs.

use std::collections::BTreeSet;

/// How a rollout groups its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Explicit groups, in order, by name; instances no group names form a last wave.
    Groups(Vec<Vec<String>>),
    /// `canary` instances first, then waves that bring the share of the fleet done to
    /// each of `percentages` (ascending, the last 100).
    Progressive { canary: usize, percentages: Vec<u8> },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the rollout selects no instance")]
    Empty,
    #[error("group {group}: instance {name:?} is not one the rollout selects")]
    UnknownInGroup { group: usize, name: String },
    #[error("instance {name:?} is in two groups")]
    Twice { name: String },
    #[error("percentages must rise from 1 to 100: {0:?}")]
    Percentages(Vec<u8>),
}

/// The waves for `instances` (their names, in any order): each wave non-empty, every
/// instance in exactly one, in the order they change.
pub fn waves(instances: &[String], strategy: &Strategy) -> Result<Vec<Vec<String>>, PlanError> {
    let mut names: Vec<String> = instances.to_vec();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return Err(PlanError::Empty);
    }
    let waves = match strategy {
        Strategy::Groups(groups) => {
            let selected: BTreeSet<&String> = names.iter().collect();
            let mut seen = BTreeSet::new();
            let mut out = Vec::new();
            for (i, g) in groups.iter().enumerate() {
                let mut wave = Vec::new();
                for n in g {
                    if !selected.contains(n) {
                        return Err(PlanError::UnknownInGroup {
                            group: i + 1,
                            name: n.clone(),
                        });
                    }
                    if !seen.insert(n.clone()) {
                        return Err(PlanError::Twice { name: n.clone() });
                    }
                    wave.push(n.clone());
                }
                out.push(wave);
            }
            out.push(
                names
                    .iter()
                    .filter(|n| !seen.contains(*n))
                    .cloned()
                    .collect(),
            );
            out
        }
        Strategy::Progressive {
            canary,
            percentages,
        } => {
            let rising = percentages.windows(2).all(|w| w[0] < w[1]);
            if percentages.is_empty()
                || !rising
                || percentages.first().is_some_and(|p| *p == 0)
                || percentages.last() != Some(&100)
            {
                return Err(PlanError::Percentages(percentages.clone()));
            }
            let total = names.len();
            let canary = (*canary).min(total);
            let mut out = vec![names[..canary].to_vec()];
            let mut done = canary;
            for p in percentages {
                // The share of the whole fleet done once this wave is, rounded up.
                let until = (total * usize::from(*p)).div_ceil(100).max(done);
                out.push(names[done..until].to_vec());
                done = until;
            }
            out
        }
    };
    Ok(waves.into_iter().filter(|w| !w.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("k{i:03}")).collect()
    }

    #[test]
    fn a_canary_then_percentages() {
        let w = waves(
            &names(50),
            &Strategy::Progressive {
                canary: 1,
                percentages: vec![10, 50, 100],
            },
        )
        .expect("waves");
        assert_eq!(w.iter().map(Vec::len).collect::<Vec<_>>(), [1, 4, 20, 25]);
        assert_eq!(w[0], ["k001"]);
    }

    #[test]
    fn groups_come_first_and_the_rest_last() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let w = waves(
            &names(4),
            &Strategy::Groups(vec![g(&["k003"]), g(&["k001", "k004"])]),
        )
        .expect("waves");
        assert_eq!(w, [g(&["k003"]), g(&["k001", "k004"]), g(&["k002"])]);
        assert_eq!(
            waves(&names(4), &Strategy::Groups(vec![g(&["k009"])])),
            Err(PlanError::UnknownInGroup {
                group: 1,
                name: "k009".into()
            })
        );
        assert!(matches!(
            waves(
                &names(4),
                &Strategy::Groups(vec![g(&["k001"]), g(&["k001"])])
            ),
            Err(PlanError::Twice { .. })
        ));
        assert_eq!(waves(&[], &Strategy::Groups(vec![])), Err(PlanError::Empty));
        for bad in [vec![], vec![50], vec![0, 100], vec![60, 50, 100]] {
            assert!(waves(
                &names(4),
                &Strategy::Progressive {
                    canary: 1,
                    percentages: bad
                }
            )
            .is_err());
        }
    }

    /// Every instance lands in exactly one wave, whatever the fleet's size and the
    /// strategy's numbers.
    #[test]
    fn every_instance_in_exactly_one_wave() {
        for total in 1..60 {
            for canary in [0, 1, 3, 100] {
                for percentages in [vec![100], vec![1, 100], vec![10, 25, 50, 75, 100]] {
                    let all = names(total);
                    let w = waves(
                        &all,
                        &Strategy::Progressive {
                            canary,
                            percentages,
                        },
                    )
                    .expect("waves");
                    let flat: Vec<String> = w.concat();
                    assert_eq!(flat, all, "{total} instances, canary {canary}");
                    assert!(w.iter().all(|x| !x.is_empty()));
                }
            }
        }
    }
}
