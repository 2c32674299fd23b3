//! Which replica owns an instance: rendezvous (highest-random-weight) hashing over the live
//! replicas. Every replica computes the same owner from the same member list with no
//! coordination, the spread is even, and a replica joining or leaving moves only the
//! instances it gains or had (about 1/N of them), never instances between the others.

/// A stable 64-bit weight of `(member, instance)`: the first 8 bytes of their SHA-256, so
/// it is the same on every replica, build and platform (std's hashers promise none of that).
fn weight(member: &str, instance: &str) -> u64 {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(member.as_bytes());
    // A separator no name contains, so ("ab", "c") and ("a", "bc") differ.
    ctx.update(&[0]);
    ctx.update(instance.as_bytes());
    let digest = ctx.finish();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_be_bytes(first)
}

/// The member that owns `instance`, or `None` when there are no members. Ties (a 1 in 2^64
/// chance) go to the smaller name, so the answer never depends on the list's order.
pub fn owner<'a, S: AsRef<str>>(instance: &str, members: &'a [S]) -> Option<&'a str> {
    members.iter().map(AsRef::as_ref).max_by(|a, b| {
        weight(a, instance)
            .cmp(&weight(b, instance))
            .then_with(|| b.cmp(a))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("karmada-{i}")).collect()
    }

    fn spread(instances: &[String], members: &[&str]) -> BTreeMap<String, usize> {
        let mut owned = BTreeMap::new();
        for i in instances {
            *owned
                .entry(owner(i, members).expect("members").to_string())
                .or_default() += 1;
        }
        owned
    }

    #[test]
    fn no_members_no_owner_and_the_order_of_members_does_not_matter() {
        assert_eq!(owner::<&str>("karmada-1", &[]), None);
        let a = ["kairship-0", "kairship-1", "kairship-2"];
        let b = ["kairship-2", "kairship-0", "kairship-1"];
        for i in names(200) {
            assert_eq!(owner(&i, &a), owner(&i, &b), "{i}");
        }
    }

    #[test]
    fn instances_spread_evenly() {
        let instances = names(3000);
        for n in [2usize, 3, 5] {
            let members: Vec<String> = (0..n).map(|i| format!("kairship-{i}")).collect();
            let refs: Vec<&str> = members.iter().map(String::as_str).collect();
            let owned = spread(&instances, &refs);
            let mean = instances.len() as f64 / n as f64;
            let max = *owned.values().max().expect("owners") as f64;
            assert_eq!(owned.len(), n, "every replica owns some: {owned:?}");
            assert!(max / mean < 1.1, "{n} replicas: max/mean {}", max / mean);
        }
    }

    #[test]
    fn a_joining_replica_takes_only_its_share_and_a_leaving_one_gives_only_its_own() {
        let instances = names(3000);
        let three = ["kairship-0", "kairship-1", "kairship-2"];
        let four = ["kairship-0", "kairship-1", "kairship-2", "kairship-3"];
        let mut moved = 0;
        for i in &instances {
            let (before, after) = (owner(i, &three), owner(i, &four));
            if before != after {
                moved += 1;
                assert_eq!(after, Some("kairship-3"), "{i} moved between old replicas");
            }
        }
        // About a quarter moves, all of it to the new replica.
        let share = moved as f64 / instances.len() as f64;
        assert!((0.2..0.3).contains(&share), "{share}");

        let two = ["kairship-0", "kairship-2"];
        for i in &instances {
            let (before, after) = (owner(i, &three), owner(i, &two));
            if before != Some("kairship-1") {
                assert_eq!(before, after, "{i} moved though its owner stayed");
            }
        }
    }
}
