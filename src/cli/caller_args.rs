//! The flags of `kairship run` (and `kairship demo`) about callers: who they are (token
//! file, OIDC, the global-management webhook's secret) and what each may hold of a
//! replica (requests and long-running requests in flight, connections).

use std::path::PathBuf;

use clap::Args;

use crate::Error;

/// Bounds on what callers may hold of a replica (kube-apiserver's --max-requests-inflight
/// and its fairness per user).
#[derive(Debug, Args, Clone)]
pub struct LimitArgs {
    /// Requests in flight on this replica at once, watches not counted.
    #[arg(long, default_value_t = LimitArgs::default().max_requests_inflight, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests_inflight: u32,
    /// Long-running requests (watches, followed logs) open on this replica at once.
    #[arg(long, default_value_t = LimitArgs::default().max_long_running_inflight, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_long_running_inflight: u32,
    /// Requests in flight per caller, watches not counted; more wait a second, then 429.
    #[arg(long, default_value_t = LimitArgs::default().max_requests_per_caller, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests_per_caller: u32,
    /// Long-running requests open per caller.
    #[arg(long, default_value_t = LimitArgs::default().max_long_running_per_caller, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_long_running_per_caller: u32,
    /// Connections open on each API port at once.
    #[arg(long, default_value_t = LimitArgs::default().max_connections, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Connections open on each API port at once from one client address (behind a load
    /// balancer or ingress that does not keep client addresses, raise it to
    /// --max-connections).
    #[arg(long, default_value_t = LimitArgs::default().max_connections_per_client, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_client: u32,
}

impl Default for LimitArgs {
    /// The chain's own defaults.
    fn default() -> Self {
        let f = crate::api::chain::fairness::Limits::default();
        let s = crate::api::serve::ServerLimits::default();
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Self {
            max_requests_inflight: n(f.total),
            max_long_running_inflight: n(f.total_long),
            max_requests_per_caller: n(f.per_caller),
            max_long_running_per_caller: n(f.per_caller_long),
            max_connections: n(s.max_connections),
            max_connections_per_client: n(s.max_connections_per_client),
        }
    }
}

impl LimitArgs {
    pub fn server(&self) -> crate::api::serve::ServerLimits {
        crate::api::serve::ServerLimits {
            max_connections: self.max_connections as usize,
            max_connections_per_client: self.max_connections_per_client as usize,
            ..Default::default()
        }
    }

    pub fn fairness(&self) -> crate::api::chain::fairness::Limits {
        crate::api::chain::fairness::Limits {
            per_caller: self.max_requests_per_caller as usize,
            per_caller_long: self.max_long_running_per_caller as usize,
            total: self.max_requests_inflight as usize,
            total_long: self.max_long_running_inflight as usize,
            ..Default::default()
        }
    }
}

/// Where callers' identities come from (at least one source, unless auth is disabled).
#[derive(Debug, Args, Clone, Default)]
pub struct AuthArgs {
    /// Static bearer tokens, kube-apiserver format: token,user,uid,"group1,group2".
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    #[command(flatten)]
    pub oidc: OidcArgs,
    /// Shared secret of the global-management webhook (HMAC-SHA256); off without it.
    #[arg(long)]
    pub webhook_secret_file: Option<PathBuf>,
    /// Serve every request as an anonymous admin. Only for throwaway local setups.
    #[arg(long)]
    pub insecure_disable_auth: bool,
    /// Kairship's namespace on the host (where the webhook remembers accepted requests).
    #[arg(long, env = "POD_NAMESPACE", default_value = "kairship-system")]
    pub namespace: String,
}

/// An OIDC provider whose ID tokens Kairship accepts, as kube-apiserver's `--oidc-*` flags.
#[derive(Debug, Args, Clone, Default)]
pub struct OidcArgs {
    /// OIDC issuer; tokens must carry it as `iss`.
    #[arg(long, requires = "oidc_client_id")]
    pub oidc_issuer_url: Option<String>,
    /// The audience (`aud`) tokens must be issued for; also the client the console signs
    /// in as (authorization code with PKCE, so a public client).
    #[arg(long, requires = "oidc_issuer_url")]
    pub oidc_client_id: Option<String>,
    /// The provider's signing keys as a JWKS file.
    #[arg(long, conflicts_with = "oidc_jwks_url")]
    pub oidc_jwks_file: Option<PathBuf>,
    /// The provider's JWKS over HTTPS, refreshed every 5 minutes and on unknown key ids.
    #[arg(long)]
    pub oidc_jwks_url: Option<String>,
    /// CA bundle that signs the JWKS URL's certificate (else the system's roots).
    #[arg(long)]
    pub oidc_ca_file: Option<PathBuf>,
    #[arg(long, default_value = "sub")]
    pub oidc_username_claim: String,
    #[arg(long, default_value = "groups")]
    pub oidc_groups_claim: String,
    /// Prefix for OIDC usernames, as kube-apiserver's flag: by default `<issuer>#` (none for
    /// the `email` claim); `-` for none.
    #[arg(long)]
    pub oidc_username_prefix: Option<String>,
    /// Prefix for OIDC groups (none by default).
    #[arg(long, default_value = "")]
    pub oidc_groups_prefix: String,
}

impl OidcArgs {
    pub fn config(&self) -> Result<Option<crate::auth::OidcConfig>, Error> {
        use crate::auth::{JwksSource, OidcConfig};
        Ok(match (&self.oidc_issuer_url, &self.oidc_client_id) {
            (Some(issuer), Some(audience)) => {
                let jwks = match (&self.oidc_jwks_file, &self.oidc_jwks_url) {
                    (Some(f), None) => JwksSource::File(f.clone()),
                    (None, Some(u)) => JwksSource::Url {
                        url: u.clone(),
                        ca_file: self.oidc_ca_file.clone(),
                    },
                    _ => {
                        return Err(Error::Usage(
                            "OIDC needs its keys: pass --oidc-jwks-file or --oidc-jwks-url".into(),
                        ))
                    }
                };
                Some(OidcConfig {
                    issuer: issuer.clone(),
                    audience: audience.clone(),
                    jwks,
                    username_claim: self.oidc_username_claim.clone(),
                    groups_claim: self.oidc_groups_claim.clone(),
                    username_prefix: self.oidc_username_prefix.clone(),
                    groups_prefix: self.oidc_groups_prefix.clone(),
                })
            }
            _ => None,
        })
    }
}

impl AuthArgs {
    pub fn config(&self) -> Result<crate::auth::AuthConfig, Error> {
        Ok(crate::auth::AuthConfig {
            token_file: self.token_auth_file.clone(),
            oidc: self.oidc.config()?,
            webhook_secret_file: self.webhook_secret_file.clone(),
            disabled: self.insecure_disable_auth,
            operator: None,
            namespace: self.namespace.clone(),
        })
    }
}
