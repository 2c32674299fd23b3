//! Fleet search across sharded replicas: the instances this replica runs are searched
//! here; each peer is asked, as the caller (its own credentials), for the same page of
//! the instances it runs; the answers are merged by the search's key. A peer that does not
//! answer in time has its instances named unavailable, as an unreachable instance is.

use std::collections::BTreeMap;

use futures::future::join_all;

use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::forward::{route, Route};
use crate::proto::{self, search_service_client::SearchServiceClient};

/// The searched instances by where they are answered.
#[derive(Debug, Default)]
pub struct Split {
    pub local: Vec<String>,
    /// By (replica, address).
    pub peers: BTreeMap<(String, String), Vec<String>>,
    /// Changing hands now: named unavailable.
    pub moving: Vec<String>,
}

/// Splits `names` by owner; all local when the fleet is not sharded, or when a peer sent
/// this search (it asked this replica for exactly the instances it runs).
pub fn split(ctx: &ApiContext, names: Vec<String>, forwarded: bool) -> Split {
    let Some(shards) = ctx.tree.shards().filter(|_| !forwarded) else {
        return Split {
            local: names,
            ..Default::default()
        };
    };
    let live = shards.live();
    let mut out = Split::default();
    for n in names {
        let i = ctx.instance(&n).ok();
        match route::route(
            shards.me(),
            i.as_deref(),
            &live,
            |r| shards.address(r),
            false,
        ) {
            Route::Local => out.local.push(n),
            Route::Peer { replica, address } => {
                out.peers.entry((replica, address)).or_default().push(n)
            }
            Route::Moving(_) => out.moving.push(n),
        }
    }
    out
}

/// What the peers answered together.
#[derive(Default)]
pub struct Gathered {
    pub hits: Vec<proto::SearchHit>,
    pub filtered: bool,
    pub unavailable: Vec<String>,
    /// A peer has hits past the page it returned.
    pub more: bool,
}

/// Asks every peer of `split` for its instances' page of `req`.
pub async fn gather(
    ctx: &ApiContext,
    authorized: &Authorized,
    req: &proto::SearchRequest,
    peers: BTreeMap<(String, String), Vec<String>>,
) -> Gathered {
    let mut out = Gathered::default();
    let Some(forwarder) = ctx.forwarder.clone() else {
        out.unavailable = peers.into_values().flatten().collect();
        return out;
    };
    let me = ctx
        .tree
        .shards()
        .map(|s| s.me().to_string())
        .unwrap_or_default();
    let current: Vec<String> = peers.keys().map(|(_, a)| a.clone()).collect();
    let asks = peers.into_iter().map(|((replica, address), names)| {
        let forwarder = forwarder.clone();
        let (current, me) = (&current, &me);
        let mut ask = req.clone();
        ask.instances = names.clone();
        let credential = authorized.credential().header().cloned();
        async move {
            let answer = async {
                let channel = forwarder
                    .channel(&address, current)
                    .map_err(|e| e.to_string())?;
                let mut call = tonic::Request::new(ask);
                if let Some(v) = credential.and_then(|v| v.to_str().ok().map(str::to_string)) {
                    let v = v
                        .parse()
                        .map_err(|_| "the caller's credential".to_string())?;
                    call.metadata_mut().insert("authorization", v);
                }
                let by = me.parse().map_err(|_| "this replica's name".to_string())?;
                call.metadata_mut().insert("kairship-forwarded-by", by);
                SearchServiceClient::new(channel)
                    .search(call)
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|s| s.message().to_string())
            }
            .await;
            (replica, names, answer)
        }
    });
    for (replica, names, answer) in join_all(asks).await {
        match answer {
            Ok(a) => {
                out.hits.extend(a.hits);
                out.filtered |= a.filtered;
                out.unavailable.extend(a.unavailable_instances);
                out.more |= !a.next_page_token.is_empty();
            }
            Err(why) => {
                tracing::warn!(replica = %replica, error = %why, "a peer did not answer a search");
                out.unavailable.extend(names);
            }
        }
    }
    out
}
