//! OIDC ID tokens: JWTs signed by the identity provider, verified against its JWKS (a
//! file, or an HTTPS URL refreshed in the background), with issuer, audience, expiry and
//! not-before checked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::RwLock;
use serde_json::Value;

use super::{AuthSetupError, UserInfo};

#[derive(Debug, Clone)]
pub enum JwksSource {
    File(PathBuf),
    /// `https://…`; `ca_file` verifies the provider when it is not publicly trusted.
    Url {
        url: String,
        ca_file: Option<PathBuf>,
    },
}

#[derive(Debug, Clone)]
pub struct OidcConfig {
    pub issuer: String,
    /// The `aud` the tokens must carry (the client id).
    pub audience: String,
    pub jwks: JwksSource,
    pub username_claim: String,
    pub groups_claim: String,
    /// Put before every username, as kube-apiserver's `--oidc-username-prefix`: `None`
    /// means kube-apiserver's default (`<issuer>#` unless the claim is `email`), `"-"`
    /// means none. It keeps an OIDC user from colliding with a token-file user.
    pub username_prefix: Option<String>,
    /// Put before every group (`--oidc-groups-prefix`), empty by default.
    pub groups_prefix: String,
}

impl OidcConfig {
    /// The username Kairship uses for a token whose username claim is `claim`.
    pub fn username(&self, claim: &str) -> String {
        let prefix = match self.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(p) => p.to_string(),
            None if self.username_claim == "email" => String::new(),
            None => format!("{}#", self.issuer),
        };
        format!("{prefix}{claim}")
    }
}

/// How often a URL's keys are fetched again, and the least time between fetches that an
/// unknown key id may trigger.
const REFRESH_EVERY: Duration = Duration::from_secs(300);
const REFRESH_AT_MOST_EVERY: Duration = Duration::from_secs(30);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

pub struct Oidc {
    config: OidcConfig,
    keys: RwLock<Arc<JwkSet>>,
    fetcher: Option<Fetcher>,
    refresh: Arc<tokio::sync::Notify>,
    last_fetch: parking_lot::Mutex<Instant>,
}

/// Only signature algorithms with a public key: an HMAC `alg` would let anyone holding
/// the (public) JWKS forge tokens.
fn allowed(alg: Algorithm) -> bool {
    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

fn parse_jwks(bytes: &[u8], source: &str) -> Result<JwkSet, AuthSetupError> {
    let set: JwkSet = serde_json::from_slice(bytes).map_err(|e| AuthSetupError::Jwks {
        origin: source.to_string(),
        message: format!("not a JWK set: {e}"),
    })?;
    if set.keys.is_empty() {
        return Err(AuthSetupError::Jwks {
            origin: source.to_string(),
            message: "the key set is empty".into(),
        });
    }
    for k in &set.keys {
        DecodingKey::from_jwk(k).map_err(|e| AuthSetupError::Jwks {
            origin: source.to_string(),
            message: format!("key {:?}: {e}", k.common.key_id),
        })?;
    }
    Ok(set)
}

impl Oidc {
    /// The issuer and the client id (audience) tokens must carry: what the console needs to
    /// send a browser to sign in.
    pub fn provider(&self) -> (&str, &str) {
        (&self.config.issuer, &self.config.audience)
    }

    /// Loads the keys once; an unreadable or invalid source refuses to start.
    pub async fn new(config: OidcConfig) -> Result<Arc<Self>, AuthSetupError> {
        if config.issuer.is_empty() || config.audience.is_empty() {
            return Err(AuthSetupError::Config(
                "OIDC needs both --oidc-issuer-url and --oidc-client-id".into(),
            ));
        }
        let (keys, fetcher) = match &config.jwks {
            JwksSource::File(path) => {
                let bytes = std::fs::read(path).map_err(|e| AuthSetupError::Read {
                    what: "--oidc-jwks-file",
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                (parse_jwks(&bytes, &path.display().to_string())?, None)
            }
            JwksSource::Url { url, ca_file } => {
                let fetcher = Fetcher::new(url, ca_file.as_ref())?;
                let bytes = fetcher.fetch().await?;
                (parse_jwks(&bytes, url)?, Some(fetcher))
            }
        };
        let oidc = Arc::new(Self {
            config,
            keys: RwLock::new(Arc::new(keys)),
            fetcher,
            refresh: Arc::new(tokio::sync::Notify::new()),
            last_fetch: parking_lot::Mutex::new(Instant::now()),
        });
        if oidc.fetcher.is_some() {
            tokio::spawn(refresh_loop(Arc::downgrade(&oidc), oidc.refresh.clone()));
        }
        Ok(oidc)
    }

    /// Verifies `token`; the error says why, for the log (callers see a generic 401).
    pub fn verify(&self, token: &str) -> Result<UserInfo, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("header: {e}"))?;
        if !allowed(header.alg) {
            return Err(format!("algorithm {:?} is not accepted", header.alg));
        }
        let keys = self.keys.read().clone();
        let jwk = find_key(&keys, header.kid.as_deref()).ok_or_else(|| {
            self.refresh_soon();
            format!("no key {:?} in the JWKS", header.kid)
        })?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("key: {e}"))?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.config.issuer]);
        v.set_audience(&[&self.config.audience]);
        v.validate_nbf = true;
        v.leeway = LEEWAY_SECS;
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Value>(token, &key, &v).map_err(|e| e.to_string())?;
        let claims = data.claims;
        let name = claims
            .get(&self.config.username_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("no {:?} claim", self.config.username_claim))?;
        // An email is a username only once the provider says it verified it: a provider
        // that does not say so may let anyone claim any address.
        if self.config.username_claim == "email"
            && claims.get("email_verified") != Some(&Value::Bool(true))
        {
            return Err("the email claim is not verified (email_verified is not true)".into());
        }
        let groups = match claims.get(&self.config.groups_claim) {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(s)) => vec![s.as_str()],
            _ => Vec::new(),
        }
        .into_iter()
        .map(|g| format!("{}{g}", self.config.groups_prefix))
        .collect();
        Ok(UserInfo {
            name: self.config.username(name),
            uid: claims
                .get("sub")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            groups,
        })
    }

    fn refresh_soon(&self) {
        if self.fetcher.is_some() && self.last_fetch.lock().elapsed() >= REFRESH_AT_MOST_EVERY {
            self.refresh.notify_one();
        }
    }
}

fn find_key<'a>(keys: &'a JwkSet, kid: Option<&str>) -> Option<&'a Jwk> {
    match kid {
        Some(kid) => keys.find(kid),
        // Without a key id, only an unambiguous set can be used.
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
}

/// Holds only a weak reference between fetches, so dropping `Oidc` ends the loop.
async fn refresh_loop(oidc: std::sync::Weak<Oidc>, wake: Arc<tokio::sync::Notify>) {
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(REFRESH_EVERY) => {}
        }
        let Some(o) = oidc.upgrade() else { return };
        let Some(fetcher) = &o.fetcher else { return };
        *o.last_fetch.lock() = Instant::now();
        match fetcher
            .fetch()
            .await
            .and_then(|b| parse_jwks(&b, &fetcher.url))
        {
            Ok(keys) => {
                tracing::info!(url = %fetcher.url, keys = keys.keys.len(), "JWKS refreshed");
                *o.keys.write() = Arc::new(keys);
            }
            // Keep the keys we have: a provider hiccup must not lock everyone out.
            Err(e) => tracing::warn!(error = %e, "JWKS refresh failed; keeping the current keys"),
        }
    }
}

struct Fetcher {
    url: String,
    uri: http::Uri,
    client: crate::outbound::Client,
}

impl Fetcher {
    fn new(url: &str, ca_file: Option<&PathBuf>) -> Result<Self, AuthSetupError> {
        use rustls::pki_types::pem::PemObject;
        let bad = |message: String| AuthSetupError::Jwks {
            origin: url.to_string(),
            message,
        };
        let uri: http::Uri = url.parse().map_err(|e| bad(format!("not a URL: {e}")))?;
        if uri.scheme_str() != Some("https") {
            return Err(bad("the JWKS URL must be https://".into()));
        }
        let mut roots = rustls::RootCertStore::empty();
        match ca_file {
            Some(path) => {
                let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| AuthSetupError::Read {
                        what: "--oidc-ca-file",
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(AuthSetupError::Read {
                        what: "--oidc-ca-file",
                        path: path.display().to_string(),
                        message: "no usable certificate in the file".into(),
                    });
                }
            }
            None => {
                let found = crate::outbound::native_roots();
                roots.add_parsable_certificates(found);
            }
        }
        let client = crate::outbound::client(roots, true).map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            url: url.to_string(),
            uri,
            client,
        })
    }

    async fn fetch(&self) -> Result<bytes::Bytes, AuthSetupError> {
        use http_body_util::BodyExt;
        let bad = |message: String| AuthSetupError::Jwks {
            origin: self.url.clone(),
            message,
        };
        let get = async {
            let resp = self
                .client
                .get(self.uri.clone())
                .await
                .map_err(|e| bad(format!("fetching: {e}")))?;
            if !resp.status().is_success() {
                return Err(bad(format!("fetching: HTTP {}", resp.status())));
            }
            let body = http_body_util::Limited::new(resp.into_body(), 1 << 20)
                .collect()
                .await
                .map_err(|e| bad(format!("reading: {e}")))?;
            Ok(body.to_bytes())
        };
        tokio::time::timeout(FETCH_TIMEOUT, get)
            .await
            .map_err(|_| bad(format!("no answer within {FETCH_TIMEOUT:?}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_algorithms_are_never_accepted() {
        assert!(!allowed(Algorithm::HS256));
        assert!(allowed(Algorithm::RS256));
        assert!(allowed(Algorithm::ES256));
    }

    #[test]
    fn usernames_are_prefixed_as_kube_apiserver_does() {
        let config = |claim: &str, prefix: Option<&str>| OidcConfig {
            issuer: "https://idp.example".into(),
            audience: "k".into(),
            jwks: JwksSource::File("j".into()),
            username_claim: claim.into(),
            groups_claim: "groups".into(),
            username_prefix: prefix.map(String::from),
            groups_prefix: String::new(),
        };
        assert_eq!(
            config("sub", None).username("alice"),
            "https://idp.example#alice"
        );
        assert_eq!(config("email", None).username("a@x.io"), "a@x.io");
        assert_eq!(config("sub", Some("-")).username("alice"), "alice");
        assert_eq!(config("sub", Some("oidc:")).username("alice"), "oidc:alice");
    }

    #[test]
    fn bad_key_sets_are_named() {
        assert!(parse_jwks(b"{\"keys\":[]}", "jwks.json")
            .expect_err("empty")
            .to_string()
            .contains("jwks.json"));
        assert!(parse_jwks(b"nope", "x").is_err());
    }
}
