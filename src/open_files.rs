//! The open-files limit. Every instance holds watch connections (counted twice when the
//! simulated fleet runs in the same process), so large fleets need far more descriptors
//! than the usual soft limit of 1,024: raise the soft limit to the hard one at start, and
//! when even that is too low say so with the number needed.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors a process needs besides its instances (listeners, clients, files).
const BASE: u64 = 256;

/// The soft limit after raising it to the hard limit (unchanged when that fails).
pub fn raise_open_files() -> u64 {
    let current = getrlimit(Resource::Nofile);
    let soft = current.current.unwrap_or(u64::MAX);
    if current.maximum.is_some_and(|hard| hard <= soft) {
        return soft;
    }
    let raised = Rlimit {
        current: current.maximum,
        maximum: current.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            let now = current.maximum.unwrap_or(u64::MAX);
            tracing::debug!(from = soft, to = now, "raised the open-files limit");
            now
        }
        Err(e) => {
            tracing::warn!(error = %e, limit = soft, "could not raise the open-files limit");
            soft
        }
    }
}

/// About how many descriptors `instances` need, at `per_instance` each.
pub fn needed(instances: usize, per_instance: u64) -> u64 {
    BASE + u64::try_from(instances)
        .unwrap_or(u64::MAX)
        .saturating_mul(per_instance)
}

/// A clear refusal when `limit` cannot hold `instances`.
pub fn check(instances: usize, per_instance: u64, limit: u64) -> Result<(), String> {
    let need = needed(instances, per_instance);
    if limit >= need {
        return Ok(());
    }
    Err(format!(
        "{instances} instance(s) need about {need} open files, but this process may open only {limit} \
         (the hard limit): raise it, e.g. `ulimit -n {need}` in a root shell, or LimitNOFILE={need} in a systemd unit"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_numbers() {
        assert!(check(10, 30, 1024).is_ok());
        let e = check(1000, 30, 1024).expect_err("too few");
        assert!(e.contains("30256") && e.contains("1024"), "{e}");
        assert!(raise_open_files() >= 1);
    }
}
