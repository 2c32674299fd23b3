//! A member cluster reached with the kubeconfig a caller hands in (to join or clean up a
//! member): self-contained credentials only, HTTPS with a CA, short timeouts, used for
//! the one call and never stored. Errors name what is wrong in the caller's terms: the
//! kubeconfig, an unreachable server, a certificate its CA does not verify, credentials
//! the member refused.

use std::time::Duration;

use kube::config::KubeConfigOptions;

use crate::error::ApiError;
use crate::host::kubeconfig::{parse_kubeconfig, without_detail};
use crate::member_networks::MemberNetworks;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// A member cluster as the caller's kubeconfig reaches it.
pub struct Member {
    pub client: kube::Client,
    pub url: String,
    /// The CA the kubeconfig trusts for the member (PEM), for Karmada's caBundle when the
    /// member's token Secret carries none.
    pub ca_pem: Option<String>,
}

impl Member {
    /// `field` names the request field the kubeconfig came in, for errors; the server
    /// must be in none of the networks `networks` refuses.
    pub async fn connect(
        field: &str,
        (kubeconfig, context): (&str, &str),
        networks: &MemberNetworks,
    ) -> Result<Self, ApiError> {
        if kubeconfig.trim().is_empty() {
            return Err(ApiError::invalid(
                field,
                "required: the member's kubeconfig",
            ));
        }
        let kc = parse_kubeconfig(kubeconfig, "a member cluster")
            .map_err(|e| ApiError::invalid(field, e))?;
        let options = KubeConfigOptions {
            context: (!context.is_empty()).then(|| context.to_string()),
            ..Default::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(|e| {
                ApiError::invalid(field, format!("invalid kubeconfig: {}", without_detail(&e)))
            })?;
        let url = config.cluster_url.to_string();
        if config.cluster_url.scheme_str() != Some("https") {
            return Err(ApiError::invalid(
                field,
                format!("server {url} is not HTTPS: the member's credentials, and the token Karmada would use, would cross the network in clear"),
            ));
        }
        if config.accept_invalid_certs {
            return Err(ApiError::invalid(
                field,
                "insecure-skip-tls-verify is not accepted: give the member's CA as certificate-authority-data",
            ));
        }
        pin_address(&mut config, networks)
            .await
            .map_err(|why| ApiError::invalid(field, format!("server {url}: {why}")))?;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(CALL_TIMEOUT);
        config.write_timeout = Some(CALL_TIMEOUT);
        let ca_pem = config.root_cert.as_ref().map(|ders| {
            ders.iter()
                .map(|d| kairship_wire::tls::pem_certificate(d))
                .collect::<String>()
        });
        let client = kube::Client::try_from(config)
            .map_err(|e| ApiError::invalid(field, format!("building a client for {url}: {e}")))?;
        Ok(Self {
            client,
            url,
            ca_pem,
        })
    }

    /// The member's identity as Karmada records it in a Cluster's `spec.id`: its
    /// `kube-system` namespace's uid (empty when the member has none).
    pub async fn cluster_id(&self) -> Result<String, ApiError> {
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(self.client.clone());
        Ok(self
            .call("get namespace kube-system", namespaces.get("kube-system"))
            .await?
            .metadata
            .uid
            .unwrap_or_default())
    }

    /// Maps a failed call to the member (`what` says what was being done) to an error in
    /// the caller's terms.
    pub fn error(&self, what: &str, e: kube::Error) -> ApiError {
        let url = &self.url;
        match e {
            kube::Error::Api(s) if s.code == 401 => ApiError::FailedPrecondition(format!(
                "the member at {url} refused the kubeconfig's credentials ({what}: 401 Unauthorized)"
            )),
            kube::Error::Api(s) if s.code == 403 => ApiError::PermissionDenied(format!(
                "the kubeconfig's user may not {what} on the member at {url}: {}",
                remote_words(&s)
            )),
            kube::Error::Api(s) => ApiError::FailedPrecondition(format!(
                "the member at {url} answered {what} with {}: {}",
                s.code,
                remote_words(&s)
            )),
            other => {
                let chain = crate::error::chain(&other);
                let lower = chain.to_ascii_lowercase();
                if lower.contains("certificate") || lower.contains("unknownissuer") {
                    ApiError::FailedPrecondition(format!(
                        "the member at {url} presented a certificate the kubeconfig's certificate-authority-data does not verify (wrong CA?): {chain}"
                    ))
                } else {
                    ApiError::FailedPrecondition(format!(
                        "the member at {url} is unreachable ({what}): {chain}"
                    ))
                }
            }
        }
    }

    /// A call to the member, bounded (the client's own timeouts cover each request; this
    /// covers the whole).
    pub async fn call<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ApiError> {
        self.bounded(what, fut)
            .await?
            .map_err(|e| self.error(what, e))
    }

    /// As `call`, with `None` for an object the member does not have (404).
    pub async fn call_unless_missing<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<Option<T>, ApiError> {
        match self.bounded(what, fut).await? {
            Ok(v) => Ok(Some(v)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(self.error(what, e)),
        }
    }

    async fn bounded<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, ApiError> {
        let within = CALL_TIMEOUT + CONNECT_TIMEOUT;
        tokio::time::timeout(within, fut).await.map_err(|_| {
            ApiError::FailedPrecondition(format!(
                "the member at {} did not answer {what} within {within:?}",
                self.url
            ))
        })
    }
}

/// What a member said, as far as it is a Kubernetes Status and short: a body that is not
/// one (anything may answer at an address a caller chose) is never echoed.
fn remote_words(s: &kube::core::Status) -> String {
    const MAX: usize = 256;
    // kube names a body it could not read as a Status so.
    if s.reason.contains("Failed to parse error data") {
        return "an answer that is not a Kubernetes Status".into();
    }
    let mut m: String = s
        .message
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX)
        .collect();
    if s.message.chars().count() > MAX {
        m.push('…');
    }
    m
}

/// Resolves the server's host once, refuses it if any of its addresses is in a refused
/// network, and pins the client to the first address (the certificate is still checked
/// for the host's name), so a name that resolves elsewhere a moment later (DNS
/// rebinding) cannot move the call.
async fn pin_address(config: &mut kube::Config, networks: &MemberNetworks) -> Result<(), String> {
    let url = config.cluster_url.clone();
    let host = url
        .host()
        .ok_or_else(|| "names no host".to_string())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = url.port_u16().unwrap_or(443);
    let ips: Vec<std::net::IpAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::lookup_host((host.as_str(), port)),
        )
        .await
        .map_err(|_| format!("resolving {host} took longer than {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| format!("{host} does not resolve: {e}"))?
        .map(|a| a.ip())
        .collect(),
    };
    if let Some(why) = ips.iter().find_map(|ip| networks.refusal(*ip)) {
        return Err(format!("refused: {why}"));
    }
    let ip = ips
        .first()
        .ok_or_else(|| format!("{host} resolves to no address"))?;
    if host.parse::<std::net::IpAddr>().is_err() {
        let authority = match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
            v4 => format!("{v4}:{port}"),
        };
        let mut parts = url.into_parts();
        parts.authority = Some(authority.parse().map_err(|e| format!("{e}"))?);
        config.cluster_url = http::Uri::from_parts(parts).map_err(|e| format!("{e}"))?;
        config.tls_server_name.get_or_insert(host);
    }
    Ok(())
}
