//! The one path every request to an instance takes, whatever its surface (gRPC, REST,
//! which the gRPC services answer, and the proxy), after kube-apiserver's handler chain:
//! authenticated (the caller), authorized (their Kairship role on the instance), routed
//! (the instance's reader, within its request limit), and from then on acting there as
//! the caller (`identity`: impersonation). Reads from the caches are reviewed with the
//! instance first (`review`), so the cache never shows what the instance would refuse;
//! writes go as the caller, bounded by one timeout, name what they wrote in the request's
//! audit event, and leave a write mark, so a read right after through any surface sees
//! them.
//!
//! Handlers get an [`OnInstance`] only from [`ApiContext::on_instance`], which takes the
//! chain's [`Authorized`], and reach an
//! instance's caches only through a [`Reads`], which only a review gives; its client only
//! through [`OnInstance::write`], [`OnInstance::live`] and [`OnInstance::send`], which act
//! as the caller. `tests/api/request_path.rs` checks that nothing under `src/api` reaches
//! an instance's reader another way.

pub mod host;
pub mod identity;
pub mod query;
pub mod review;
pub mod wake;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use tokio::sync::OwnedSemaphorePermit;

use crate::api::chain::{audit, Authorized};
use crate::api::context::ApiContext;
use crate::auth::{Caller, Role};
use crate::cache::caches::Kind;
use crate::cache::store::ObjectStore;
use crate::cache::InstanceReader;
use crate::error::{check_name, ApiError};
use crate::host::error::INSTANCE;
pub use identity::Identity;
pub use review::{Verb, Visible};

pub use crate::api::chain::Surface;

/// How long a request may wait for a free slot of a busy instance.
const PERMIT_WAIT: Duration = Duration::from_secs(2);

/// A request on one instance that passed the handler chain and routing.
pub struct OnInstance {
    pub caller: Caller,
    pub surface: Surface,
    /// Who the request acts as on the instance; `None` with authorization off.
    identity: Option<Identity>,
    /// The caller's Kairship role there; `None` with authorization off.
    role: Option<Role>,
    reader: Arc<InstanceReader>,
    /// The request's audit record, which writes name their object in.
    record: audit::Record,
    _permit: OwnedSemaphorePermit,
}

impl ApiContext {
    /// The start of every request to an instance: the instance the chain authorized the
    /// request on (`authorized`), routed to, failing fast with UNAVAILABLE when it cannot
    /// serve.
    pub async fn on_instance(
        &self,
        authorized: &Authorized,
        instance: &str,
    ) -> Result<OnInstance, ApiError> {
        let instance = authorized.instance(instance)?;
        self.routed(authorized, instance, true).await
    }

    /// For a request over what the caller may see (search): `instance` if the caller holds
    /// `need` there (PERMISSION_DENIED otherwise, which such a request leaves out rather
    /// than answers), routed to.
    pub async fn on_instance_seen(
        &self,
        authorized: &Authorized,
        need: Role,
        instance: &str,
    ) -> Result<OnInstance, ApiError> {
        self.authorize(authorized.caller(), need, instance, "read")?;
        // A search across the fleet does not wake every sleeping instance it passes.
        self.routed(authorized, instance, false).await
    }

    async fn routed(
        &self,
        authorized: &Authorized,
        instance: &str,
        wake: bool,
    ) -> Result<OnInstance, ApiError> {
        let caller = authorized.caller().clone();
        let (reader, permit) = self.route(instance, wake).await?;
        let identity = identity::on_instance(self, &caller, instance);
        let role = identity
            .as_ref()
            .and_then(|_| self.auth.role_on(&caller, instance));
        if let Some(who) = &identity {
            authorized.record().update(|f| {
                f.impersonated = Some(audit::User {
                    username: who.user.clone(),
                    uid: who.uid.clone(),
                    groups: who.groups.clone(),
                })
            });
        }
        Ok(OnInstance {
            caller,
            surface: authorized.surface(),
            identity,
            role,
            reader,
            record: authorized.record().clone(),
            _permit: permit,
        })
    }

    /// The instance's reader and a slot of its request limit.
    async fn route(
        &self,
        name: &str,
        wake: bool,
    ) -> Result<(Arc<InstanceReader>, OwnedSemaphorePermit), ApiError> {
        check_name("instance", name)?;
        let mut instance = self.instance(name)?;
        if wake::sleeping(&instance, self.tree.settings().wake_timeout) {
            if !wake {
                return Err(ApiError::Unavailable(format!(
                    "instance {name:?} is hibernated; a request to it wakes it"
                )));
            }
            self.wake(name).await?;
            instance = self.instance(name)?;
        }
        let Some(reader) = self.tree.reader(name) else {
            let why = match instance.spec.paused {
                true => "it is paused".to_string(),
                false => format!(
                    "its actor is not running (phase {:?})",
                    instance
                        .status
                        .as_ref()
                        .map(|s| s.phase)
                        .unwrap_or_default()
                ),
            };
            return Err(ApiError::Unavailable(format!(
                "instance {name:?} cannot serve requests: {why}"
            )));
        };
        reader
            .health()
            .map_err(|why| ApiError::Unavailable(why.to_string()))?;
        let permit = tokio::time::timeout(PERMIT_WAIT, reader.limiter().clone().acquire_owned())
            .await
            .map_err(|_| {
                ApiError::ResourceExhausted(format!(
                    "instance {name:?} has too many requests in flight"
                ))
            })?
            .map_err(|_| ApiError::Unavailable(format!("instance {name:?} is shutting down")))?;
        Ok((reader, permit))
    }
}

/// Proof that a read was reviewed with the instance: the caches, for the kinds reviewed.
pub struct Reads<'a> {
    reader: &'a InstanceReader,
}

impl<'a> Reads<'a> {
    pub fn store(&self, kind: Kind) -> Result<&'a ObjectStore, ApiError> {
        if let Some(why) = self.reader.over_budget() {
            return Err(ApiError::Unavailable(format!(
                "instance {:?} is {why}",
                self.reader.name()
            )));
        }
        self.reader.store(kind).ok_or_else(|| {
            ApiError::Unavailable(format!("the {} cache is missing", kind.resource().kind))
        })
    }

    /// The change feed of `kind` (cache-served watches).
    pub fn feed(&self, kind: Kind) -> Option<&'a crate::cache::feed::Feed> {
        self.reader.store(kind).map(ObjectStore::feed)
    }

    /// The columns of each kind's Tables.
    pub fn printers(&self) -> &'a crate::cache::printers::Printers {
        self.reader.printers()
    }

    /// The columns the instance prints for `kind` (read with Kairship's own credentials:
    /// they come from the CRD, not from anything the caller reads).
    pub async fn columns(&self, kind: Kind) -> Option<Arc<Vec<kairship_wire::table::Column>>> {
        let client = self.reader.client()?;
        self.reader.printers().columns(client, kind).await
    }

    /// Whether the cache has this process's latest write of `kind`, waiting up to a
    /// second (the proxy passes the read on to the instance when it has not).
    pub async fn caught_up(&self, kind: Kind) -> bool {
        review::caught_up(self.reader, kind).await
    }

    pub fn instance(&self) -> &'a str {
        self.reader.name()
    }
}

impl OnInstance {
    pub fn instance(&self) -> &str {
        self.reader.name()
    }

    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// What the caches hold without reading objects: which kinds are cached and whether
    /// their watches are failing (the proxy decides from this whether the cache answers).
    pub fn caches(&self) -> review::CacheState<'_> {
        review::CacheState::of(&self.reader)
    }

    /// Reviews a read of `kind` with the instance (refused in the instance's words), waits
    /// briefly for the cache to have this process's latest write of it, and gives access
    /// to the caches. Reads of Kairship's own identity (auth off) need no review.
    pub async fn read(
        &self,
        verb: Verb,
        kind: Kind,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Reads<'_>, ApiError> {
        self.review(verb, kind, namespace, name).await?;
        review::caught_up(&self.reader, kind).await;
        Ok(Reads {
            reader: &self.reader,
        })
    }

    /// As [`read`](Self::read) for a proxied request: the review of a raw resource path.
    pub async fn read_path(&self, attrs: &review::ReadAttributes) -> Result<Reads<'_>, ApiError> {
        if let Some(who) = &self.identity {
            review::require(&self.reader, who, attrs).await?;
        }
        Ok(Reads {
            reader: &self.reader,
        })
    }

    async fn review(
        &self,
        verb: Verb,
        kind: Kind,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(who) = &self.identity else {
            return Ok(());
        };
        let attrs = review::ReadAttributes::of(verb, kind, namespace, name);
        review::require(&self.reader, who, &attrs).await
    }

    /// The caches without a review of their own, for what the caller was reviewed for
    /// already, kind by kind (a trace's policies, through `Beside`).
    pub fn unreviewed(&self) -> Reads<'_> {
        Reads {
            reader: &self.reader,
        }
    }

    /// Whether the caller may `verb` `kind` (in `namespace`): for what a read adds beside
    /// its subject (a workload's placement from its binding, the policies that select it).
    pub async fn may(&self, verb: Verb, kind: Kind, namespace: Option<&str>) -> bool {
        self.review(verb, kind, namespace, None).await.is_ok()
    }

    /// A list of a namespaced `kind` across namespaces (`namespace` empty) or in one: the
    /// namespaces the caller may list there, as the instance decides (kube-apiserver
    /// refuses a cluster-wide list outright; Kairship's lists feed a console, so they show
    /// what may be seen and say that they were filtered).
    pub async fn list(
        &self,
        kind: Kind,
        namespace: &str,
    ) -> Result<(Reads<'_>, Visible), ApiError> {
        let visible = match (&self.identity, namespace, kind.namespaced()) {
            (None, _, _) => Visible::All,
            (Some(_), "", true) => match self.review(Verb::List, kind, None, None).await {
                Ok(()) => Visible::All,
                Err(ApiError::Forbidden(_)) => {
                    let who = self
                        .identity
                        .as_ref()
                        .ok_or_else(|| ApiError::Internal("no identity".into()))?;
                    review::namespaces(&self.reader, who, kind).await?
                }
                Err(e) => return Err(e),
            },
            (Some(_), ns, true) => {
                self.review(Verb::List, kind, Some(ns), None).await?;
                Visible::All
            }
            (Some(_), _, false) => {
                self.review(Verb::List, kind, None, None).await?;
                Visible::All
            }
        };
        review::caught_up(&self.reader, kind).await;
        Ok((
            Reads {
                reader: &self.reader,
            },
            visible,
        ))
    }

    /// The instance's client acting as the caller, for work that outlives the request (a
    /// backup): the caller's identity goes with it, never Kairship's own.
    pub fn acting_client(&self) -> Result<kube::Client, ApiError> {
        self.client()
    }

    /// The bound on one call to the instance.
    pub fn call_timeout(&self) -> Duration {
        self.reader.call_timeout()
    }

    /// The instance's client acting as the caller (Kairship's own with auth off).
    fn client(&self) -> Result<kube::Client, ApiError> {
        self.acting(self.reader.client())
    }

    fn acting(&self, client: Option<&kube::Client>) -> Result<kube::Client, ApiError> {
        let client = client.cloned().ok_or_else(|| {
            ApiError::Unavailable(format!(
                "instance {:?} is not connected",
                self.reader.name()
            ))
        })?;
        match &self.identity {
            Some(who) => identity::acting_as(client, who),
            None => Ok(client),
        }
    }

    /// A write of `kind` as the caller: bounded by the instance call timeout, named in the
    /// request's audit event, and marked so the next read of `kind` from the cache waits
    /// for it.
    pub async fn write<F, Fut>(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
        call: F,
    ) -> Result<Option<DynamicObject>, ApiError>
    where
        F: FnOnce(Api<DynamicObject>) -> Fut,
        Fut: std::future::Future<Output = Result<Option<DynamicObject>, kube::Error>>,
    {
        let namespace = namespace.filter(|_| kind.namespaced());
        self.write_resource(&kind.resource(), namespace, name, call)
            .await
    }

    /// A write of any `resource` (cached by Kairship or not) as the caller, in `namespace`
    /// or cluster-wide: bounded by the instance call timeout, named in the request's audit
    /// event, and, for a cached kind, marked for read-your-writes.
    pub async fn write_resource<F, Fut>(
        &self,
        resource: &kube::api::ApiResource,
        namespace: Option<&str>,
        name: &str,
        call: F,
    ) -> Result<Option<DynamicObject>, ApiError>
    where
        F: FnOnce(Api<DynamicObject>) -> Fut,
        Fut: std::future::Future<Output = Result<Option<DynamicObject>, kube::Error>>,
    {
        let client = self.client()?;
        let api = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        };
        let what = format!("{} {name:?}", resource.kind);
        let result = self.bounded(&what, call(api)).await;
        let written = result.as_ref().ok().and_then(|o| o.as_ref());
        let rv = written
            .and_then(|o| o.metadata.resource_version.as_deref())
            .and_then(|rv| rv.parse::<u64>().ok());
        let kind = Kind::ALL.into_iter().find(|k| k.resource() == *resource);
        if let Some((kind, rv)) = kind.zip(rv) {
            self.reader.writes().record(kind, rv);
        }
        self.record
            .object(&resource.plural, &resource.group, namespace, name);
        result
    }

    /// A read the caches cannot answer, made live as the caller (the instance's RBAC
    /// decides), bounded by the instance call timeout.
    pub async fn live<T, F, Fut>(&self, what: &str, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(kube::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        self.bounded(what, call(self.client()?)).await
    }

    async fn bounded<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ApiError> {
        let after = self.reader.call_timeout();
        let answer = crate::host::error::bounded_on(INSTANCE, what, after, fut).await;
        Ok(answer?)
    }

    /// The proxy's pass-through: `req` sent as the caller; `within` bounds the wait for the
    /// answer's head (none for a watch).
    pub async fn send(
        &self,
        req: http::Request<kube::client::Body>,
        within: Option<Duration>,
    ) -> Result<http::Response<kube::client::Body>, ApiError> {
        self.send_with(self.client()?, req, within).await
    }

    /// An upgraded connection's request (exec, attach, port-forward) sent as the caller on
    /// an HTTP/1.1 connection of its own; `within` bounds the wait for the answer's head.
    /// A `101` answer carries the instance's side of the connection (`hyper::upgrade::on`).
    pub async fn send_upgrade(
        &self,
        req: http::Request<kube::client::Body>,
        within: Duration,
    ) -> Result<http::Response<kube::client::Body>, ApiError> {
        let client = self.acting(self.reader.upgrades())?;
        self.send_with(client, req, Some(within)).await
    }

    async fn send_with(
        &self,
        client: kube::Client,
        req: http::Request<kube::client::Body>,
        within: Option<Duration>,
    ) -> Result<http::Response<kube::client::Body>, ApiError> {
        let sent = client.send(req);
        let resp = match within {
            None => sent.await,
            Some(within) => tokio::time::timeout(within, sent).await.map_err(|_| {
                ApiError::DeadlineExceeded(format!(
                    "instance {:?} did not answer within {within:?}",
                    self.reader.name()
                ))
            })?,
        };
        resp.map_err(|e| ApiError::Unavailable(format!("instance {:?}: {e}", self.reader.name())))
    }

    /// Counts the proxy's answer for the instance (`cache::traffic`).
    pub fn count_answer(&self, status: http::StatusCode) {
        self.reader.traffic.record(status);
    }

    /// A slot for a stream held open on the instance (a watch passed through), kept as long
    /// as the stream runs; RESOURCE_EXHAUSTED (429) when the instance has as many as it
    /// may, so streams never take the streams reads need.
    pub fn open_stream(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        use crate::actors::instance::MAX_PASSTHROUGH_STREAMS as MAX;
        // The last streams are kept for the roles above the caller's, so viewers' watches
        // never leave an editor, nor anyone an administrator, without one.
        let kept = match self.role {
            Some(Role::View) => 2 * MAX / 5,
            Some(Role::Edit) => MAX / 5,
            Some(Role::Admin) | None => 0,
        };
        let streams = self.reader.streams();
        if kept > 0 && streams.available_permits() <= kept {
            return Err(ApiError::ResourceExhausted(format!(
                "instance {:?} has the streams (watches) it keeps for your role passed through already ({} of {MAX}; the last {kept} are kept for editors and administrators); watch from the cache (start now or at a cached list's resourceVersion) or retry later",
                self.reader.name(),
                MAX - streams.available_permits(),
            )));
        }
        streams.clone().try_acquire_owned().map_err(|_| {
            ApiError::ResourceExhausted(format!(
                "instance {:?} has {} streams (watches) passed through already, the most it may; watch from the cache (start now or at a cached list's resourceVersion) or retry later",
                self.reader.name(),
                crate::actors::instance::MAX_PASSTHROUGH_STREAMS
            ))
        })
    }

    /// The endpoint and CA certificates the instance is reached with, once connected.
    pub fn certificate_inputs(&self) -> Option<&crate::certificates::Inputs> {
        self.reader.trust()
    }

    /// A successful write the proxy passed through, so cached reads wait for it.
    pub fn mark_written(&self, kind: Kind, resource_version: u64) {
        self.reader.writes().record(kind, resource_version);
    }
}
