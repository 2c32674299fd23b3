//! Reads answered from an instance's caches are asked of the instance first (a
//! `SubjectAccessReview` for the caller, decisions kept briefly per instance), so the cache
//! never shows what the instance would refuse; a refusal is the instance's own 403.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::cache::caches::Kind;
use crate::cache::InstanceReader;
use crate::error::{ApiError, Refusal};

use super::identity::Identity;
pub use crate::cache::access::ReadAttributes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
        }
    }
}

impl ReadAttributes {
    pub fn of(verb: Verb, kind: Kind, namespace: Option<&str>, name: Option<&str>) -> Self {
        let r = kind.resource();
        Self {
            verb: verb.as_str(),
            group: r.group,
            resource: r.plural,
            namespace: namespace.filter(|n| !n.is_empty()).map(String::from),
            name: name.map(String::from),
        }
    }
}

/// Asks the instance whether `who` may make this read; fails closed (without the
/// instance's word, the cache shows nothing).
pub(super) async fn require(
    reader: &InstanceReader,
    who: &Identity,
    what: &ReadAttributes,
) -> Result<(), ApiError> {
    let client = reader.client().ok_or_else(|| {
        ApiError::Unavailable(format!("instance {:?} is not connected", reader.name()))
    })?;
    match reader.access().allowed(client, who, what).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(forbidden(who, what)),
        Err(e) => Err(ApiError::Unavailable(format!(
            "instance {:?}: {e}",
            reader.name()
        ))),
    }
}

/// The 403 the instance itself gives, in its words.
fn forbidden(who: &Identity, a: &ReadAttributes) -> ApiError {
    ApiError::Forbidden(Box::new(Refusal {
        message: kairship_wire::status::forbidden_message(kairship_wire::status::Refused {
            user: &who.user,
            verb: a.verb,
            group: &a.group,
            resource: &a.resource,
            subresource: None,
            name: a.name.as_deref(),
            namespace: a.namespace.as_deref(),
        }),
        name: a.name.clone().unwrap_or_default(),
        group: a.group.clone(),
        kind: a.resource.clone(),
    }))
}

/// The namespaces a list across namespaces shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visible {
    All,
    /// Only these: the caller may not list the kind at the cluster scope, and was refused
    /// in some of the namespaces that hold it.
    Only {
        namespaces: BTreeSet<String>,
        filtered: bool,
    },
}

impl Visible {
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only { namespaces, .. } => namespaces.contains(namespace),
        }
    }

    /// Whether the answer leaves out what exists (to be said in it).
    pub fn filtered(&self) -> bool {
        matches!(self, Self::Only { filtered: true, .. })
    }
}

/// For a caller refused a cluster-wide list of `kind`: the namespaces holding it in the
/// cache where the instance lets them list it (one review each, decisions cached).
pub(super) async fn namespaces(
    reader: &InstanceReader,
    who: &Identity,
    kind: Kind,
) -> Result<Visible, ApiError> {
    let present: BTreeSet<String> = reader
        .store(kind)
        .map(|s| s.namespaces().into_iter().collect())
        .unwrap_or_default();
    let mut allowed = BTreeSet::new();
    for ns in &present {
        let attrs = ReadAttributes::of(Verb::List, kind, Some(ns), None);
        match require(reader, who, &attrs).await {
            Ok(()) => {
                allowed.insert(ns.clone());
            }
            Err(ApiError::Forbidden(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Visible::Only {
        filtered: allowed.len() < present.len(),
        namespaces: allowed,
    })
}

/// Whether the cache has seen the newest write of `kind` made through Kairship, waiting
/// up to a second for it.
pub(super) async fn caught_up(reader: &InstanceReader, kind: Kind) -> bool {
    let want = reader.writes().get(kind);
    let Some(feed) = reader.store(kind).map(|s| s.feed()) else {
        return want == 0;
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while feed.last_rv() < want {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// What an instance caches, without its objects: which kinds, and whether a kind's watch
/// is failing (the cache may be behind; the instance answers for itself).
pub struct CacheState<'a> {
    reader: &'a InstanceReader,
}

impl<'a> CacheState<'a> {
    pub(super) fn of(reader: &'a InstanceReader) -> Self {
        Self { reader }
    }

    /// Whether the cache can answer reads of `kind` now.
    pub fn serves(&self, kind: Kind) -> bool {
        self.reader.store(kind).is_some()
            && !self.reader.watch_failing(kind)
            && self.reader.over_budget().is_none()
    }
}
