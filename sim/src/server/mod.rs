//! One simulated API server: HTTPS with its own certificate, a required bearer token,
//! its own store, and its own faults.

mod cluster_proxy;
pub mod discovery;
mod resource;
use resource::Query;
pub mod scale;
pub mod shared;
pub mod table;
mod token;
pub mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;
use tracing::{debug, warn, Instrument};

use crate::faults::{FaultState, Injection};
use crate::rbac::{self, Identity};
use crate::resources::Flavor;
use crate::store::{Store, StoreConfig};
use kairship_wire::routes::{self, ResourcePath, Route};
use kairship_wire::status::{ApiError, ApiResult};
use rustls::sign::CertifiedKey;

/// Knobs of a simulated API server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub store: StoreConfig,
    pub max_body_bytes: usize,
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` end after this long.
    pub default_watch_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            store: StoreConfig::default(),
            // kube-apiserver's default limit on a request body.
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(10),
            default_watch_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// One API call as an RBAC rule sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct AuditEntry {
    /// The user whose token made the call (`admin` for the kubeconfig's own token).
    pub user: String,
    pub verb: String,
    pub group: String,
    /// The plural, with `/subresource` when there is one.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// The next connection on `listener`, past failed accepts (out of descriptors, say),
/// which are logged and tried again a little later.
async fn accept(listener: &TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(x) => return x,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A server's certificate: the CA its kubeconfigs carry, and the chain and key it serves
/// (valid for loopback and for its own name, which it is reached by behind a shared
/// listener).
pub struct ServerTls {
    pub ca_pem: String,
    pub key: Arc<CertifiedKey>,
}

impl ServerTls {
    fn issue(name: &str) -> Result<Self, crate::Error> {
        let issued = kairship_wire::tls::issue(name, &[name.to_string()])?;
        Ok(Self {
            key: issued.certified_key()?,
            ca_pem: issued.ca_pem,
        })
    }
}

pub struct ApiServer {
    pub name: String,
    pub store: Store,
    pub faults: FaultState,
    pub token: String,
    pub tls: ServerTls,
    config: ServerConfig,
    addr: parking_lot::Mutex<Option<SocketAddr>>,
    /// Served behind a [`shared::SharedListener`], reached by its name (SNI) there.
    by_name: std::sync::atomic::AtomicBool,
    shutdown: tokio_watch::Sender<bool>,
    /// Extra users by token, besides the admin token.
    users: parking_lot::RwLock<HashMap<String, Identity>>,
    /// When tokens issued by TokenRequest stop authenticating.
    token_expiry: parking_lot::RwLock<HashMap<String, std::time::Instant>>,
    /// Every distinct call served, while auditing is on (for RBAC checks in tests).
    audit: parking_lot::Mutex<Option<std::collections::BTreeSet<AuditEntry>>>,
    /// Member clusters' objects, served through the Cluster `proxy` subresource.
    members: parking_lot::RwLock<Option<Arc<crate::karmada::Members>>>,
}

fn random_token() -> String {
    use rand::Rng;
    let b: [u8; 24] = rand::rng().random();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl ApiServer {
    pub fn new(
        name: &str,
        flavor: Flavor,
        config: ServerConfig,
    ) -> Result<Arc<Self>, crate::Error> {
        Ok(Arc::new(Self {
            name: name.to_string(),
            store: Store::new(flavor, config.store.clone())?,
            faults: FaultState::default(),
            token: random_token(),
            tls: ServerTls::issue(name)?,
            config,
            addr: parking_lot::Mutex::new(None),
            by_name: Default::default(),
            shutdown: tokio_watch::channel(false).0,
            audit: parking_lot::Mutex::new(None),
            members: parking_lot::RwLock::new(None),
            users: parking_lot::RwLock::new(HashMap::new()),
            token_expiry: parking_lot::RwLock::new(HashMap::new()),
        }))
    }

    pub fn addr(&self) -> Option<SocketAddr> {
        *self.addr.lock()
    }

    pub fn url(&self) -> String {
        self.addr()
            .map(|a| format!("https://{a}"))
            .unwrap_or_default()
    }

    /// The name a client must ask for (kubeconfig `tls-server-name`) when this server
    /// shares its listener with others.
    pub fn tls_server_name(&self) -> Option<&str> {
        self.by_name
            .load(std::sync::atomic::Ordering::Relaxed)
            .then_some(self.name.as_str())
    }

    fn is_shut_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Adds a cluster-admin user (group `system:masters`) with its own bearer token
    /// (returned), so audits can tell callers apart.
    pub fn add_user(&self, user: &str) -> String {
        self.add_user_with_groups(user, &["system:masters"])
    }

    /// Adds a user whose rights come only from RBAC (its groups and bindings).
    pub fn add_user_with_groups(&self, user: &str, groups: &[&str]) -> String {
        let token = random_token();
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        groups.push("system:authenticated".into());
        let who = Identity {
            user: user.to_string(),
            uid: String::new(),
            groups,
        };
        self.users.write().insert(token.clone(), who);
        token
    }

    fn user_of(&self, token: &str) -> Option<Identity> {
        if token == self.token {
            return Some(Identity {
                user: "admin".into(),
                uid: String::new(),
                groups: vec!["system:masters".into(), "system:authenticated".into()],
            });
        }
        if self
            .token_expiry
            .read()
            .get(token)
            .is_some_and(|at| *at <= std::time::Instant::now())
        {
            return None;
        }
        self.users.read().get(token).cloned()
    }

    /// Starts recording every distinct resource call.
    pub fn enable_audit(&self) {
        self.audit.lock().get_or_insert_with(Default::default);
    }

    /// The calls recorded since auditing was enabled.
    pub fn audit(&self) -> Vec<AuditEntry> {
        self.audit
            .lock()
            .as_ref()
            .map(|a| a.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn record(&self, user: &str, method: &Method, rp: &ResourcePath, watch: bool) {
        let mut guard = self.audit.lock();
        let Some(audit) = guard.as_mut() else { return };
        let verb = match (method.as_str(), rp.name.is_some()) {
            ("GET", true) => "get",
            ("GET", false) if watch => "watch",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            (other, _) => other,
        };
        let resource = match &rp.subresource {
            Some(sub) => format!("{}/{sub}", rp.plural),
            None => rp.plural.clone(),
        };
        audit.insert(AuditEntry {
            user: user.into(),
            verb: verb.into(),
            group: rp.group.clone(),
            resource,
            namespace: rp.namespace.clone(),
            name: rp.name.clone(),
        });
    }

    /// Serves these member clusters through `clusters/{name}/proxy/...`.
    pub fn serve_members(&self, members: Arc<crate::karmada::Members>) {
        *self.members.write() = Some(members);
    }

    /// Stops accepting connections and cuts the open ones.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Binds `addr` and serves until [`ApiServer::shutdown`].
    pub async fn start(self: &Arc<Self>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let config = kairship_wire::tls::server_config_resolving(Arc::new(
            kairship_wire::tls::FixedKey(self.tls.key.clone()),
        ))
        .map_err(std::io::Error::other)?;
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        *self.addr.lock() = Some(local);
        let this = self.clone();
        let span = tracing::info_span!("apiserver", server = %self.name);
        tokio::spawn(this.accept_loop(listener, config).instrument(span));
        Ok(local)
    }

    async fn accept_loop(
        self: Arc<Self>,
        listener: TcpListener,
        config: Arc<rustls::ServerConfig>,
    ) {
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let mut shutdown = self.shutdown.subscribe();
        loop {
            let (tcp, peer) = tokio::select! {
                a = accept(&listener) => a,
                _ = shutdown.changed() => return,
            };
            if self.faults.is_down() {
                // Reset rather than close, as a dead server's port would.
                let _ = tcp.set_zero_linger();
                drop(tcp);
                continue;
            }
            // kube-apiserver (Go) sets TCP_NODELAY on every connection.
            let _ = tcp.set_nodelay(true);
            let this = self.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return debug!(%peer, error = %e, "tls handshake failed"),
                    Err(_) => return debug!(%peer, "tls handshake timed out"),
                };
                this.serve_connection(tls).await;
            });
        }
    }

    /// Serves one TLS connection's requests until it closes, the server stops, or a
    /// fault takes the server down.
    async fn serve_connection(
        self: Arc<Self>,
        tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    ) {
        let mut faults = self.faults.subscribe();
        let mut shutdown = self.shutdown.subscribe();
        let svc_server = self.clone();
        let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let s = svc_server.clone();
            async move { Ok::<_, std::convert::Infallible>(s.handle(req.map(Body::new)).await) }
        });
        let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        let conn = builder.serve_connection(TokioIo::new(tls), svc);
        tokio::pin!(conn);
        loop {
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = shutdown.changed() => return,
                changed = faults.changed() => {
                    if changed.is_err() || self.faults.is_down() { return; }
                }
            }
        }
    }

    /// Answers one request; every failure is a `Status` object.
    pub async fn handle(&self, req: Request<Body>) -> Response<Body> {
        match self.injected().await {
            Ok(()) => {}
            Err(e) => return status_response(&e),
        }
        let user = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|t| self.user_of(t.trim()));
        let Some(user) = user else {
            return status_response(&ApiError::unauthorized());
        };
        let who = match rbac::effective(&self.store, user.clone(), req.headers()) {
            Ok(who) => who,
            Err(e) => return status_response(&e),
        };
        match self.route(req, &user.user, &who).await {
            Ok(r) => r,
            Err(e) => status_response(&e),
        }
    }

    async fn injected(&self) -> ApiResult<()> {
        match self.faults.for_request() {
            Injection::None => Ok(()),
            Injection::Delay(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Injection::Fail(e) => Err(e),
        }
    }

    async fn route(
        &self,
        req: Request<Body>,
        user: &str,
        who: &Identity,
    ) -> ApiResult<Response<Body>> {
        let path = req.uri().path().to_string();
        let route = routes::parse(&path);
        let watch = Query::parse(req.uri().query().unwrap_or(""))?.flag("watch");
        let attrs = rbac::attributes(req.method(), &path, &route, watch);
        if rbac::authorize(&self.store, who, &attrs).is_none() {
            return Err(rbac::forbidden(who, &attrs));
        }
        if let Route::ClusterProxy { cluster, path } = &route {
            return self.cluster_proxy(&req, cluster, path, who);
        }
        if req.method() != Method::GET && !matches!(route, Route::Resource(_)) {
            return Err(ApiError::method_not_allowed(req.method().as_str()));
        }
        let reg = || self.store.registry();
        match route {
            Route::Root => Ok(json_response(
                StatusCode::OK,
                &json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]}),
            )),
            Route::Version => Ok(json_response(StatusCode::OK, &discovery::version())),
            Route::Health => Ok(Response::new(Body::from("ok"))),
            Route::CoreVersions => Ok(json_response(
                StatusCode::OK,
                &discovery::core_versions(&self.addr().map(|a| a.to_string()).unwrap_or_default()),
            )),
            Route::GroupList => Ok(json_response(
                StatusCode::OK,
                &discovery::group_list(&reg()),
            )),
            Route::Group(g) => discovery::group(&reg(), &g)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::path_not_found(&path)),
            Route::ResourceList { group, version } => {
                discovery::resource_list(&reg(), &group, &version)
                    .map(|d| json_response(StatusCode::OK, &d))
                    .ok_or_else(|| ApiError::path_not_found(&path))
            }
            Route::OpenApi => openapi_document(&self.store, &path)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::path_not_found(&path)),
            Route::NotFound | Route::ClusterProxy { .. } => Err(ApiError::path_not_found(&path)),
            Route::Resource(rp) => self.resource(req, rp, user, who).await,
        }
    }

    async fn read_body(&self, req: Request<Body>) -> ApiResult<Bytes> {
        let limit = self.config.max_body_bytes;
        let limited = http_body_util::Limited::new(req.into_body(), limit);
        match limited.collect().await {
            Ok(c) => Ok(c.to_bytes()),
            Err(e)
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some() =>
            {
                Err(ApiError::too_large(limit))
            }
            Err(e) => Err(ApiError::bad_request(format!("reading request body: {e}"))),
        }
    }

    async fn read_json(&self, req: Request<Body>) -> ApiResult<Value> {
        Ok(self.read_json_checked(req).await?.0)
    }

    /// The JSON body, with the duplicate fields it repeats (the last one kept).
    async fn read_json_checked(
        &self,
        req: Request<Body>,
    ) -> ApiResult<(Value, crate::store::fields::validation::Findings)> {
        // kubectl's typed `create` subcommands send protobuf, decoded for the kinds they
        // build; CBOR is refused as kube-apiserver refuses a format it does not serve.
        let ct = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if ct.starts_with("application/cbor") {
            return Err(ApiError::unsupported_media_type(&ct));
        }
        if ct.starts_with("application/vnd.kubernetes.protobuf") {
            let body = self.read_body(req).await?;
            return Ok((crate::protobuf::decode(&body)?, Default::default()));
        }
        let body = self.read_body(req).await?;
        let mut found = Default::default();
        let v = crate::store::fields::validation::parse(&body, &mut found).map_err(|e| {
            ApiError::bad_request(format!("the body of the request was not valid JSON: {e}"))
        })?;
        Ok((v, found))
    }
}

/// `/openapi/v2`, `/openapi/v3` or `/openapi/v3/{group-version}`, as served now.
fn openapi_document(store: &Store, path: &str) -> Option<Value> {
    let catalog = crate::openapi::Catalog::of(store);
    match path.trim_end_matches('/') {
        "/openapi/v2" => Some(crate::openapi::v2(&catalog)),
        "/openapi/v3" => Some(crate::openapi::v3_root(&catalog)),
        p => crate::openapi::v3_group_version(&catalog, p.strip_prefix("/openapi/v3/")?),
    }
}

/// kube-apiserver's conversion of a boolean query parameter: `0` and `false` (any case)
/// are false, anything else that is present, even empty, is true.
pub fn query_bool(v: Option<&str>) -> bool {
    match v {
        None | Some("0") => false,
        Some(v) => !v.eq_ignore_ascii_case("false"),
    }
}

fn bytes_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn json_response(code: StatusCode, v: &Value) -> Response<Body> {
    bytes_response(code, Bytes::from(v.to_string()))
}

fn stream_response(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    r
}

pub fn status_response(e: &ApiError) -> Response<Body> {
    bytes_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Bytes::from(e.to_status_bytes()),
    )
}
