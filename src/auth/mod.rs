//! Authentication (static token file, OIDC JWTs) and per-instance authorization (roles
//! from `InstanceRoleBinding` objects), shared by gRPC, REST and the proxy; and the
//! global-management webhook that turns an IAM's role events into bindings.

pub mod authorizer;
pub mod oidc;
pub mod token_file;
pub mod webhook;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::crd::Role;
use crate::error::ApiError;
use authorizer::{Bindings, Index};
pub use oidc::{JwksSource, OidcConfig};

/// Who is calling, as the token said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// Where identities come from; `None` everywhere with `disabled` is for tests and local
/// experiments only.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    pub token_file: Option<PathBuf>,
    pub oidc: Option<OidcConfig>,
    /// Shared secret of the global-management webhook; the endpoint is off without it.
    pub webhook_secret_file: Option<PathBuf>,
    /// Every request is allowed as an anonymous admin.
    pub disabled: bool,
    /// Who Kairship itself acts as on the host, recorded on the bindings it writes.
    pub operator: Option<String>,
    /// Kairship's namespace on the host, where the webhook remembers accepted signatures
    /// (`kairship-system` when empty).
    pub namespace: String,
}

/// Why Kairship refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("{what} {path}: {message}")]
    Read {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("token file {path} line {line}: {message}")]
    TokenFile {
        path: String,
        line: usize,
        message: String,
    },
    #[error("JWKS {origin}: {message}")]
    Jwks { origin: String, message: String },
    #[error("{0}")]
    Config(String),
}

/// Who a request acts as on an instance (what the proxy impersonates, and what access
/// reviews of cached reads ask about): made from the [`Caller`] by
/// `api::request::identity::on_instance`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: UserInfo,
    /// Authorization is off: every check passes.
    unrestricted: bool,
}

impl Caller {
    /// Whether authorization is off for this caller (`--insecure-disable-auth`).
    pub fn is_unrestricted(&self) -> bool {
        self.unrestricted
    }
}

/// A static token as held: its SHA-256, so a lookup's timing says nothing about the
/// token's bytes and the process holds no token in the clear.
type TokenDigest = [u8; 32];

fn digest(token: &str) -> TokenDigest {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The group prefix of Kairship's roles on instances (`kairship:view`, ...): only
/// Kairship grants them, from its bindings, never a token or an IdP.
pub const ROLE_GROUP_PREFIX: &str = "kairship:";

/// The token of an `authorization` header's value (`Bearer <token>`), if it holds one.
pub fn bearer(authorization: &str) -> Option<&str> {
    authorization
        .strip_prefix("Bearer ")
        .or_else(|| authorization.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

pub struct Auth {
    tokens: HashMap<TokenDigest, UserInfo>,
    oidc: Option<Arc<oidc::Oidc>>,
    bindings: Option<Bindings>,
    pub webhook: Option<webhook::Webhook>,
}

/// The same answer for a missing, unknown, expired or forged token: nothing about which
/// part failed or which instances exist.
fn unauthenticated() -> ApiError {
    ApiError::Unauthenticated("a valid bearer token is required".into())
}

impl Auth {
    /// The OIDC issuer and client id, when OIDC is configured (the console's sign-in).
    pub fn oidc_provider(&self) -> Option<(String, String)> {
        self.oidc
            .as_ref()
            .map(|o| (o.provider().0.to_string(), o.provider().1.to_string()))
    }

    /// Everything allowed, as `anonymous` (tests, benchmarks' baseline).
    pub fn disabled() -> Arc<Self> {
        Arc::new(Self {
            tokens: HashMap::new(),
            oidc: None,
            bindings: None,
            webhook: None,
        })
    }

    /// Loads every configured source; any unreadable or invalid one is an error.
    pub async fn new(config: &AuthConfig, host: kube::Client) -> Result<Arc<Self>, AuthSetupError> {
        if config.disabled {
            if config.token_file.is_some() || config.oidc.is_some() {
                return Err(AuthSetupError::Config(
                    "authentication is disabled but a token file or OIDC is configured: choose one"
                        .into(),
                ));
            }
            return Ok(Self::disabled());
        }
        if config.token_file.is_none() && config.oidc.is_none() {
            return Err(AuthSetupError::Config(
                "no authentication source: pass --token-auth-file and/or --oidc-issuer-url (or --insecure-disable-auth for a throwaway setup)".into(),
            ));
        }
        let tokens = match &config.token_file {
            Some(path) => token_file::load(path)?
                .into_iter()
                .map(|(token, user)| (digest(&token), user))
                .collect(),
            None => HashMap::new(),
        };
        let oidc = match &config.oidc {
            Some(c) => Some(oidc::Oidc::new(c.clone()).await?),
            None => None,
        };
        let webhook = match &config.webhook_secret_file {
            Some(path) => Some(webhook::Webhook::new(
                path,
                host.clone(),
                config.operator.clone().unwrap_or_else(|| "kairship".into()),
                if config.namespace.is_empty() {
                    "kairship-system"
                } else {
                    &config.namespace
                },
            )?),
            None => None,
        };
        Ok(Arc::new(Self {
            tokens,
            oidc,
            bindings: Some(Bindings::watch(host)),
            webhook,
        }))
    }

    pub fn enabled(&self) -> bool {
        self.bindings.is_some()
    }

    /// Waits for the first list of bindings, so early requests are not denied wrongly.
    pub async fn ready(&self) {
        if let Some(b) = &self.bindings {
            b.ready().await;
        }
    }

    /// Whether the bindings have been listed once (always, with auth disabled).
    pub fn is_listed(&self) -> bool {
        self.bindings.as_ref().is_none_or(Bindings::is_listed)
    }

    /// `authorization` is the header's value (`Bearer <token>`).
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, ApiError> {
        if !self.enabled() {
            return Ok(Caller {
                user: UserInfo {
                    name: "anonymous".into(),
                    uid: String::new(),
                    groups: Vec::new(),
                },
                unrestricted: true,
            });
        }
        let token = authorization.and_then(bearer).ok_or_else(unauthenticated)?;
        if let Some(user) = self.tokens.get(&digest(token)) {
            return self.caller(user.clone());
        }
        if let Some(oidc) = &self.oidc {
            // Only something shaped like a JWT is worth verifying.
            if token.bytes().filter(|b| *b == b'.').count() == 2 {
                return match oidc.verify(token) {
                    // One name, one person: an IdP's user who would be a token file's
                    // user (no prefix, the same email) is not let in as them.
                    Ok(user) if self.tokens.values().any(|t| t.name == user.name) => {
                        tracing::warn!(user = %user.name, "OIDC token refused: its username is a token-file user's (set --oidc-username-prefix)");
                        Err(unauthenticated())
                    }
                    Ok(user) => self.caller(user),
                    Err(why) => {
                        tracing::debug!(reason = %why, "OIDC token refused");
                        Err(unauthenticated())
                    }
                };
            }
        }
        Err(unauthenticated())
    }

    /// The caller a verified identity becomes. `system:` users are Kubernetes' own
    /// components and refused; `system:` groups (`system:masters` is cluster-admin) and
    /// Kairship's role groups are dropped: neither is an IdP's to grant.
    fn caller(&self, mut user: UserInfo) -> Result<Caller, ApiError> {
        if user.name.starts_with("system:") {
            tracing::debug!(user = %user.name, "refused: system: usernames are reserved");
            return Err(unauthenticated());
        }
        user.groups
            .retain(|g| !g.starts_with("system:") && !g.starts_with(ROLE_GROUP_PREFIX));
        // Like Kubernetes: every authenticated user is in this group, so a binding can
        // grant something to everyone who logged in.
        user.groups.push("system:authenticated".into());
        Ok(Caller {
            user,
            unrestricted: false,
        })
    }

    fn index(&self) -> Arc<Index> {
        self.bindings
            .as_ref()
            .map(Bindings::index)
            .unwrap_or_default()
    }

    /// The caller's role on `instance`, if any.
    pub fn role_on(&self, caller: &Caller, instance: &str) -> Option<Role> {
        match caller.unrestricted {
            true => Some(Role::Admin),
            false => self.index().role_on(&caller.user, instance),
        }
    }

    /// A filter for lists: which instances the caller may at least view.
    pub fn viewer(&self, caller: &Caller) -> impl Fn(&str) -> bool + use<> {
        let index = self.index();
        let (user, unrestricted) = (caller.user.clone(), caller.unrestricted);
        move |instance| unrestricted || index.role_on(&user, instance).is_some()
    }

    /// The strongest role the caller holds on every instance, if any.
    pub fn role_on_all(&self, caller: &Caller) -> Option<Role> {
        match caller.unrestricted {
            true => Some(Role::Admin),
            false => self.index().role_on_all(&caller.user),
        }
    }

    /// Whether the caller holds a role on every instance (sees fleet-wide state).
    pub fn sees_all(&self, caller: &Caller) -> bool {
        caller.unrestricted || self.index().role_on_all(&caller.user).is_some()
    }

    /// PERMISSION_DENIED unless the caller holds `need` on `instance`; `action` says what
    /// was attempted ("list workloads").
    pub fn authorize(
        &self,
        caller: &Caller,
        need: Role,
        instance: &str,
        action: &str,
    ) -> Result<(), ApiError> {
        let has = self.role_on(caller, instance);
        if has.is_some_and(|r| r >= need) {
            return Ok(());
        }
        let has = has.map_or("no role".to_string(), |r| format!("role {:?}", r.as_str()));
        Err(ApiError::PermissionDenied(format!(
            "user {:?} may not {action} on instance {instance:?}: that needs role {:?}, and the user has {has} there",
            caller.user.name,
            need.as_str()
        )))
    }
}
