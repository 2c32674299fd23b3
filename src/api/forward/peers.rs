//! Asking the peers for their share of a fleet-wide answer (search, the actor tree): a
//! gRPC call to each live peer as the caller (its own credentials, so each peer decides
//! for itself what the caller sees), marked forwarded so the peer answers only for what
//! it runs.

use std::future::Future;

use futures::future::join_all;

use super::{Forwarder, FORWARDED_BY_NAME};
use crate::host::shards::Shards;

/// Every live peer (not this replica) with its address.
pub fn live(shards: &Shards) -> Vec<(String, String)> {
    shards
        .live()
        .into_iter()
        .filter(|r| r != shards.me())
        .filter_map(|r| shards.address(&r).map(|a| (r, a)))
        .collect()
}

/// A call to a peer carrying `credential` (the caller's `Authorization` header) and this
/// replica's name as the forwarder.
pub fn request<T>(
    msg: T,
    credential: Option<&http::HeaderValue>,
    me: &str,
) -> Result<tonic::Request<T>, String> {
    let mut call = tonic::Request::new(msg);
    if let Some(v) = credential {
        let v = tonic::metadata::MetadataValue::try_from(v.as_bytes())
            .map_err(|_| "the caller's credential is not a header value".to_string())?;
        call.metadata_mut().insert("authorization", v);
    }
    let by = me
        .parse()
        .map_err(|_| format!("this replica's name {me:?} is not a header value"))?;
    call.metadata_mut().insert(FORWARDED_BY_NAME, by);
    Ok(call)
}

/// Calls `ask` on each of `peers` at once; each answer (or why there is none) by peer.
pub async fn each<T, F, Fut>(
    forwarder: &Forwarder,
    peers: Vec<(String, String)>,
    ask: F,
) -> Vec<(String, Result<T, String>)>
where
    F: Fn(&str, tonic::transport::Channel) -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let current: Vec<String> = peers.iter().map(|(_, a)| a.clone()).collect();
    let calls = peers.into_iter().map(|(replica, address)| {
        let channel = forwarder.channel(&address, &current);
        let ask = &ask;
        async move {
            let answer = match channel {
                Ok(c) => ask(&replica, c).await,
                Err(e) => Err(e.to_string()),
            };
            (replica, answer)
        }
    });
    join_all(calls).await
}
