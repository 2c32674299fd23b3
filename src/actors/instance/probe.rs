//! Reachability probes of one instance: `GET /version`, bounded by `Settings::probe_timeout`,
//! sent from the tick (every `probe_every_ticks` while the instance answers, on every tick
//! while it does not) and once more at once after a failure.

use std::time::Duration;

use ractor::ActorRef;

use super::messages::{InstanceMsg, ProbeError};

/// The probes' bookkeeping; what they found moves the lifecycle.
#[derive(Debug, Default)]
pub struct Probes {
    pub in_flight: bool,
    /// Failures in a row; `Settings::unreachable_after` of them make the instance Unreachable.
    pub failures: u32,
    /// Ticks since the last probe was sent.
    pub ticks_since: u32,
}

impl Probes {
    /// Whether this tick sends a probe: the instance answers and one is due, or it does not
    /// answer (yet).
    pub fn due(&mut self, answering: bool, every_ticks: u32) -> bool {
        self.ticks_since += 1;
        !answering || self.failures > 0 || self.ticks_since >= every_ticks
    }

    /// Sends one probe, unless one is in flight; its answer comes back as `Probed`.
    pub fn send(&mut self, client: &kube::Client, me: &ActorRef<InstanceMsg>, timeout: Duration) {
        if self.in_flight {
            return;
        }
        self.in_flight = true;
        self.ticks_since = 0;
        let (client, me) = (client.clone(), me.clone());
        super::spawn_here(async move {
            let result = match tokio::time::timeout(timeout, client.apiserver_version()).await {
                Ok(Ok(v)) => Ok(v.git_version),
                Ok(Err(e)) => Err(ProbeError::Failed(e)),
                Err(_) => Err(ProbeError::TimedOut(timeout)),
            };
            let _ = me.send_message(InstanceMsg::Probed(result));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answering_instance_is_probed_every_n_ticks_a_silent_one_every_tick() {
        let mut p = Probes::default();
        assert!(!p.due(true, 2));
        assert!(p.due(true, 2));
        p.ticks_since = 0;
        assert!(p.due(false, 2), "not answering yet");
        p.ticks_since = 0;
        p.failures = 1;
        assert!(p.due(true, 2), "a failure not yet confirmed");
    }
}
