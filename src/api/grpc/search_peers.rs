//! Fleet search across sharded replicas: the instances this replica runs are searched
//! here; each peer is asked, as the caller (its own credentials), for the same page of
//! the instances it runs; the answers are merged by the search's key. A peer that does not
//! answer in time has its instances named unavailable, as an unreachable instance is.

use std::collections::BTreeMap;

use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::forward::{peers, route, Route};
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
            Route::Moving(_) | Route::Misdirected(_) => out.moving.push(n),
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
    let (Some(forwarder), Some(shards)) = (ctx.forwarder.clone(), ctx.tree.shards()) else {
        out.unavailable = peers.into_values().flatten().collect();
        return out;
    };
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut addresses = Vec::new();
    for ((replica, address), ns) in peers {
        names.insert(replica.clone(), ns);
        addresses.push((replica, address));
    }
    let credential = authorized.credential().header();
    let answers = peers::each(&forwarder, addresses, |replica, channel| {
        let mut ask = req.clone();
        ask.instances = names.get(replica).cloned().unwrap_or_default();
        async move {
            let call = peers::request(ask, credential, shards.me())?;
            SearchServiceClient::new(channel)
                .search(call)
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| s.message().to_string())
        }
    })
    .await;
    for (replica, answer) in answers {
        match answer {
            Ok(a) => {
                out.hits.extend(a.hits);
                out.filtered |= a.filtered;
                out.unavailable.extend(a.unavailable_instances);
                out.more |= !a.next_page_token.is_empty();
            }
            Err(why) => {
                tracing::warn!(replica = %replica, error = %why, "a peer did not answer a search");
                out.unavailable
                    .extend(names.remove(&replica).unwrap_or_default());
            }
        }
    }
    out
}
