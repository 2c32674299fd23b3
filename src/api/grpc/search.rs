//! SearchService: one query across the fleet ("where does `app=payments` run?"), answered
//! from the instances' caches. Every instance the caller may view is searched through the
//! request path (so within each only what the instance lets the caller list is seen); an
//! instance that cannot answer now is named in the answer rather than failing the search.
//! Hits are ordered by instance, kind, namespace and name; only the page returned is
//! decorated with placement and policies.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;

use kube::api::DynamicObject;
use tonic::{Request, Response, Status};

use super::beside::Beside;
use super::workload::workload_for;
use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::request::OnInstance;
use crate::api::{objects, paging};
use crate::auth::Role;
use crate::cache::caches::Kind;
use crate::cache::object::CachedObject;
use crate::error::{check_name, ApiError};
use crate::proto::{self, search_service_server::SearchService};

pub struct Search(pub ApiContext);

/// What a search looks for, checked before any instance is asked.
struct Query {
    kinds: Vec<Kind>,
    labels: kairship_wire::selectors::LabelSelector,
    namespace: String,
    name: String,
    substring: bool,
    instances: BTreeSet<String>,
    instance_labels: kairship_wire::selectors::LabelSelector,
}

fn parse(req: &proto::SearchRequest) -> Result<Query, ApiError> {
    let kinds = match req.kinds.is_empty() {
        true => Kind::ALL.to_vec(),
        false => req
            .kinds
            .iter()
            .enumerate()
            .map(|(i, k)| {
                Kind::from_name(k, &Kind::ALL).ok_or_else(|| {
                    let names: Vec<String> = Kind::ALL.iter().map(|k| k.resource().kind).collect();
                    ApiError::invalid(
                        format!("kinds[{i}]"),
                        format!("{k:?} is not one of {}", names.join(", ")),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let selector = |field: &str, text: &str| {
        kairship_wire::selectors::LabelSelector::parse(text)
            .map_err(|e| ApiError::invalid(field, e.message))
    };
    if !req.namespace.is_empty() {
        check_name("namespace", &req.namespace)?;
    }
    for (i, name) in req.instances.iter().enumerate() {
        check_name(&format!("instances[{i}]"), name)?;
    }
    Ok(Query {
        kinds,
        labels: selector("label_selector", &req.label_selector)?,
        namespace: req.namespace.clone(),
        name: req.name.clone(),
        substring: req.name_match == proto::NameMatch::Substring as i32,
        instances: req.instances.iter().cloned().collect(),
        instance_labels: selector("instance_selector", &req.instance_selector)?,
    })
}

impl Query {
    fn matches(&self, kind: Kind, o: &CachedObject) -> bool {
        let name = o.name();
        let ns = o.namespace().unwrap_or_default();
        (self.name.is_empty()
            || (self.substring && name.contains(&self.name))
            || (!self.substring && name == self.name))
            && (self.namespace.is_empty() || !kind.namespaced() || ns == self.namespace)
            && paging::cached_labels_match(&self.labels, o)
    }
}

/// How many of this replica's instances one search asks at once.
const INSTANCES_AT_ONCE: usize = 32;

/// What one instance of this replica answered.
struct Local {
    on: OnInstance,
    hits: Vec<(Kind, Arc<CachedObject>)>,
    filtered: bool,
    /// A kind's read failed: the instance is named unavailable, with what it did answer.
    unavailable: bool,
}

/// Searches `name`'s caches as the caller; `None` when the instance cannot answer now.
async fn search_one(
    ctx: &ApiContext,
    authorized: &Authorized,
    q: &Query,
    name: &str,
) -> Result<Option<Local>, ApiError> {
    let on = match ctx.on_instance_seen(authorized, Role::View, name).await {
        Ok(on) => on,
        Err(ApiError::Unavailable(_) | ApiError::ResourceExhausted(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (mut hits, mut filtered, mut unavailable) = (Vec::new(), false, false);
    for &kind in &q.kinds {
        let (reads, visible) = match on.list(kind, &q.namespace).await {
            Ok(r) => r,
            // Not this kind (here, or in this namespace), for this caller.
            Err(ApiError::Forbidden(_)) => {
                filtered = true;
                continue;
            }
            Err(ApiError::Unavailable(_)) => {
                unavailable = true;
                break;
            }
            Err(e) => return Err(e),
        };
        filtered |= visible.filtered();
        let Ok(store) = reads.store(kind) else {
            continue;
        };
        let selected = store.select(None, None, q.labels.required_label(), |o| {
            let ns = o.namespace().unwrap_or_default();
            (!kind.namespaced() || visible.allows(ns)) && q.matches(kind, o)
        });
        hits.extend(selected.objects.into_iter().map(|o| (kind, o)));
    }
    Ok(Some(Local {
        on,
        hits,
        filtered,
        unavailable,
    }))
}

/// A hit before decoration: its instance (index into the searched), kind and object; or
/// one a peer found (and decorated) in an instance it runs.
enum Found {
    Here(usize, Kind, Arc<CachedObject>),
    Peer(Box<proto::SearchHit>),
}

/// The order of hits, and what a page token encodes.
fn key(instance: &str, kind: &str, namespace: &str, name: &str) -> String {
    format!("{instance}/{kind}/{namespace}/{name}")
}

#[tonic::async_trait]
impl SearchService for Search {
    async fn search(
        &self,
        req: Request<proto::SearchRequest>,
    ) -> Result<Response<proto::SearchResponse>, Status> {
        let ctx = &self.0;
        let authorized = Authorized::of(&req)?;
        let forwarded = req
            .metadata()
            .contains_key(crate::api::forward::FORWARDED_BY.as_str());
        let req = req.into_inner();
        let q = parse(&req)?;
        let viewer = ctx.auth.viewer(authorized.caller());
        let mut names: Vec<String> = ctx
            .instances()
            .iter()
            .filter(|i| {
                let labels = i.metadata.labels.as_ref();
                paging::labels_match(&q.instance_labels, labels)
            })
            .filter_map(|i| i.metadata.name.clone())
            .filter(|n| viewer(n) && (q.instances.is_empty() || q.instances.contains(n)))
            .collect();
        names.sort();
        // Sharded: the instances other replicas run are searched there.
        let split = super::search_peers::split(ctx, names, forwarded);
        let peers = super::search_peers::gather(ctx, &authorized, &req, split.peers).await;
        let mut searched: Vec<OnInstance> = Vec::new();
        let mut found: Vec<(String, (String, Found))> = peers
            .hits
            .into_iter()
            .map(|h| {
                let k = key(&h.instance, &h.kind, &h.namespace, &h.name);
                (k.clone(), (k, Found::Peer(Box::new(h))))
            })
            .collect();
        let (mut filtered, mut unavailable) = (peers.filtered, peers.unavailable);
        unavailable.extend(split.moving);
        // The instances are asked at once, a bounded number at a time: each may need a
        // review of the caller by its API server, and a search over hundreds of instances
        // one by one would outlast a peer's patience.
        let answers: Vec<(String, Result<Option<Local>, ApiError>)> =
            futures::stream::iter(split.local)
                .map(|name| {
                    let (q, authorized) = (&q, &authorized);
                    async move {
                        let got = search_one(ctx, authorized, q, &name).await;
                        (name, got)
                    }
                })
                .buffered(INSTANCES_AT_ONCE)
                .collect()
                .await;
        for (name, answer) in answers {
            let Some(local) = answer? else {
                unavailable.push(name);
                continue;
            };
            filtered |= local.filtered;
            if local.unavailable {
                unavailable.push(name.clone());
            }
            let at = searched.len();
            for (kind, o) in local.hits {
                let ns = o.namespace().unwrap_or_default();
                let k = key(&name, &kind.resource().kind, ns, o.name());
                found.push((k.clone(), (k, Found::Here(at, kind, o))));
            }
            searched.push(local.on);
        }
        unavailable.sort();
        unavailable.dedup();
        let mut page = paging::paginate_by(found, req.page_size, &req.page_token, "")?;
        // A peer with hits past its page: this page ends where the merged one does.
        if page.next_page_token.is_empty() && peers.more {
            if let Some((last, _)) = page.items.last() {
                page.next_page_token = paging::token(last);
            }
        }
        let mut hits = Vec::with_capacity(page.items.len());
        for (_, f) in page.items {
            hits.push(match f {
                Found::Here(at, kind, o) => hit(&searched[at], kind, &objects::decoded(&o)?).await,
                Found::Peer(h) => *h,
            });
        }
        Ok(Response::new(proto::SearchResponse {
            hits,
            next_page_token: page.next_page_token,
            filtered,
            unavailable_instances: unavailable,
        }))
    }
}

/// One hit, with its workload's placement and policies where the caller may see them.
async fn hit(on: &OnInstance, kind: Kind, o: &DynamicObject) -> proto::SearchHit {
    let mut h = proto::SearchHit {
        instance: on.instance().to_string(),
        kind: kind.resource().kind,
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        name: o.metadata.name.clone().unwrap_or_default(),
        labels: o
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        ..Default::default()
    };
    if Kind::WORKLOADS.contains(&kind) {
        let beside = Beside::of(on, [h.namespace.clone()]).await;
        if let Some(w) = workload_for(on, &beside, kind, o).await {
            h.placement = w.placement;
            h.replicas = w.replicas;
            h.ready_replicas = w.ready_replicas;
            h.policies = w.policies;
        }
    }
    h
}
