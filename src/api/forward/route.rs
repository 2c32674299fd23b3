//! Where a request for an instance is answered when the fleet is sharded: here, by the
//! replica recorded as the instance's owner, or nowhere yet (it is changing hands).

use std::collections::BTreeSet;

use crate::crd::Instance;
use crate::host::shards::handoff;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Answered here (this replica owns it, or it does not exist: the handler says so).
    Local,
    /// Answered by the owner, reached at `address`.
    Peer { replica: String, address: String },
    /// No replica can answer yet: why.
    Moving(String),
    /// A peer forwarded it here, and this replica does not own it (any more): the peer
    /// is told at once and sends it again where the record now says.
    Misdirected(String),
}

/// The route for `instance` seen from replica `me`, with `live` replicas alive and their
/// `address`es. A request a peer already forwarded here is never forwarded again: the two
/// disagree for a moment about who owns it, and the peer, told so at once, sends it again
/// once its record settles.
pub fn route(
    me: &str,
    instance: Option<&Instance>,
    live: &BTreeSet<String>,
    address: impl Fn(&str) -> Option<String>,
    forwarded: bool,
) -> Route {
    let Some(i) = instance else {
        return Route::Local;
    };
    match route_for(me, i, live, address) {
        Route::Peer { replica, .. } if forwarded => Route::Misdirected(format!(
            "replica {me:?} no longer runs it; {replica:?} does"
        )),
        Route::Moving(why) if forwarded => Route::Misdirected(why),
        r => r,
    }
}

fn route_for(
    me: &str,
    i: &Instance,
    live: &BTreeSet<String>,
    address: impl Fn(&str) -> Option<String>,
) -> Route {
    match handoff::recorded(i) {
        Some(owner) if owner == me && live.contains(me) => Route::Local,
        // This replica included: it released its Lease and is handing the instance over.
        Some(owner) if !live.contains(owner) => Route::Moving(format!(
            "its owner {owner:?} left; another replica is taking it over"
        )),
        Some(owner) => match address(owner) {
            Some(address) => Route::Peer {
                replica: owner.to_string(),
                address,
            },
            None => Route::Moving(format!("its owner {owner:?} has published no address")),
        },
        None => Route::Moving("no replica has taken it yet".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned_by(owner: Option<&str>) -> Instance {
        let mut i = Instance::new(
            "karmada-1",
            serde_json::from_value(serde_json::json!({"mode": "External"})).expect("spec"),
        );
        if let Some(o) = owner {
            i.metadata.annotations =
                Some([(handoff::OWNER_ANNOTATION.to_string(), o.to_string())].into());
        }
        i
    }

    #[test]
    fn requests_go_to_the_recorded_owner_and_wait_while_it_moves() {
        let live: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let addr = |r: &str| (r == "b").then(|| "https://10.0.0.2:8443".to_string());
        assert_eq!(route("a", None, &live, addr, false), Route::Local);
        assert_eq!(
            route("a", Some(&owned_by(Some("a"))), &live, addr, false),
            Route::Local
        );
        assert_eq!(
            route("a", Some(&owned_by(Some("b"))), &live, addr, false),
            Route::Peer {
                replica: "b".into(),
                address: "https://10.0.0.2:8443".into()
            }
        );
        // Forwarded once already: never passed on, the forwarder is told to send it again.
        assert!(matches!(
            route("a", Some(&owned_by(Some("b"))), &live, addr, true),
            Route::Misdirected(_)
        ));
        assert!(matches!(
            route("a", Some(&owned_by(Some("c"))), &live, addr, true),
            Route::Misdirected(_)
        ));
        assert_eq!(
            route("a", Some(&owned_by(Some("a"))), &live, addr, true),
            Route::Local
        );
        // The owner died, or nobody has it yet, or it cannot be reached.
        assert!(matches!(
            route("a", Some(&owned_by(Some("c"))), &live, addr, false),
            Route::Moving(_)
        ));
        assert!(matches!(
            route("a", Some(&owned_by(None)), &live, addr, false),
            Route::Moving(_)
        ));
        // This replica is handing it over (its Lease released): it waits for the next.
        let without_me: BTreeSet<String> = ["b"].map(String::from).into();
        assert!(matches!(
            route("a", Some(&owned_by(Some("a"))), &without_me, addr, false),
            Route::Moving(_)
        ));
        let no_addr = |_: &str| None;
        assert!(matches!(
            route("a", Some(&owned_by(Some("b"))), &live, no_addr, false),
            Route::Moving(_)
        ));
    }
}
