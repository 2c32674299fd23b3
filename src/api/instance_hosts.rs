//! Each instance at a host name of its own: `<instance>.<base domain>`, by the TLS server
//! name (SNI) or the `Host`. A request there is the instance's own API, so the edge turns
//! it into the proxy's path form before anything else reads it; clients that build URLs
//! from the server's host alone (`kubectl get --raw`, karmadactl's cluster proxy) then
//! reach the instance, not Kairship's root.
//!
//! A connection set up for one name must not carry requests for another: when the SNI
//! and a `Host` that is a name (not an address, which names nothing) disagree and either
//! is an instance's, the request is refused with 421 Misdirected Request, the answer
//! after which clients that pooled the connection (HTTP/2 coalescing under a wildcard
//! certificate) open a new one. client-go's `tls-server-name` with an address for the
//! server sends the instance's name as SNI and the address as `Host`: that agrees.

use crate::error::ApiError;

/// The demo's base domain: `*.localtest` is reserved (RFC 2606) and never resolves, so
/// clients reach it by address with the name as TLS server name (a kubeconfig's
/// `tls-server-name`).
pub const DEMO_DOMAIN: &str = "kairship.localtest";

/// The base domain under which every instance has its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceHosts {
    /// `.` and the domain, lower case.
    suffix: String,
}

/// What the base domain given fails to be.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("instance domain {0:?}: {1}")]
pub struct DomainError(String, &'static str);

impl InstanceHosts {
    /// Hosts under `domain` (a DNS name such as `kairship.example.com`).
    pub fn new(domain: &str) -> Result<Self, DomainError> {
        let err = |why| DomainError(domain.to_string(), why);
        let d = domain.trim_end_matches('.').to_ascii_lowercase();
        if d.is_empty() || d.len() > 200 {
            return Err(err("must be a DNS name of at most 200 characters"));
        }
        if d.starts_with("*.") {
            return Err(err("give the domain itself, without the wildcard"));
        }
        if !d.split('.').all(is_label) {
            return Err(err("must be dot-separated DNS labels (a-z, 0-9, -)"));
        }
        Ok(Self {
            suffix: format!(".{d}"),
        })
    }

    /// The domain, as given (lower case).
    pub fn domain(&self) -> &str {
        &self.suffix[1..]
    }

    /// `instance`'s host name.
    pub fn host_of(&self, instance: &str) -> String {
        format!("{instance}{}", self.suffix)
    }

    /// The certificate name that covers every instance's host.
    pub fn wildcard(&self) -> String {
        format!("*{}", self.suffix)
    }

    /// The instance a request is for by its SNI and `Host` (either may be missing), or
    /// none (Kairship's own API), or why the two cannot both be right.
    pub fn instance_of(
        &self,
        sni: Option<&str>,
        host: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        let host = host.map(strip_port).filter(|h| !names_nothing(h));
        let by_sni = sni.map(|s| self.under(s)).transpose()?.flatten();
        let by_host = host.map(|h| self.under(h)).transpose()?.flatten();
        if let (Some(s), Some(h)) = (sni, host) {
            if (by_sni.is_some() || by_host.is_some()) && !s.eq_ignore_ascii_case(h) {
                return Err(ApiError::Misdirected(format!(
                    "this connection is for {s:?}, the request for {h:?}: open a connection to {h:?}"
                )));
            }
        }
        Ok(by_host.or(by_sni))
    }

    /// The instance `name` is the host of, when it is under the domain.
    fn under(&self, name: &str) -> Result<Option<String>, ApiError> {
        let lower = name.trim_end_matches('.').to_ascii_lowercase();
        let Some(label) = lower.strip_suffix(self.suffix.as_str()) else {
            return Ok(None);
        };
        match is_label(label) {
            true => Ok(Some(label.to_string())),
            false => Err(ApiError::NotFound(format!(
                "{name:?} is under {:?} but is not an instance's host (<instance>{})",
                self.domain(),
                self.suffix
            ))),
        }
    }
}

/// A DNS label (RFC 1123), as instance names are.
fn is_label(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 63
        && l.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

/// The host of a `Host` value (`name`, `name:port`, `[v6]:port`).
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// An address or `localhost`: a `Host` that says nothing about which instance.
fn names_nothing(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok() || host.eq_ignore_ascii_case("localhost")
}

/// The `Host` a request was sent to: HTTP/2's `:authority` (in the URI), else the header.
pub fn host_of<B>(req: &http::Request<B>) -> Option<&str> {
    req.uri().authority().map(|a| a.as_str()).or_else(|| {
        req.headers()
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> InstanceHosts {
        InstanceHosts::new("Kairship.Example.com.").expect("a domain")
    }

    #[test]
    fn an_instance_by_sni_or_host() {
        let h = hosts();
        let one = Some("karmada-1".to_string());
        let at = |sni, host| h.instance_of(sni, host).map_err(|e| e.to_string());
        assert_eq!(
            at(Some("karmada-1.kairship.example.com"), None),
            Ok(one.clone())
        );
        assert_eq!(
            at(None, Some("KARMADA-1.kairship.example.com:8443")),
            Ok(one.clone())
        );
        // client-go's tls-server-name with an address for the server.
        for addr in ["127.0.0.1:8443", "[::1]:8443", "localhost:8443", "10.0.0.7"] {
            assert_eq!(
                at(Some("karmada-1.kairship.example.com"), Some(addr)),
                Ok(one.clone())
            );
        }
        assert_eq!(
            at(
                Some("karmada-1.kairship.example.com"),
                Some("karmada-1.kairship.example.com")
            ),
            Ok(one)
        );
        // Kairship's own names.
        assert_eq!(
            at(Some("kairship.example.com"), Some("kairship.example.com")),
            Ok(None)
        );
        assert_eq!(at(Some("localhost"), Some("127.0.0.1:1")), Ok(None));
        assert_eq!(at(None, None), Ok(None));
    }

    #[test]
    fn sni_and_host_that_disagree_are_misdirected() {
        let h = hosts();
        for (sni, host) in [
            (
                "karmada-1.kairship.example.com",
                "karmada-2.kairship.example.com",
            ),
            ("kairship.example.com", "karmada-2.kairship.example.com"),
            ("karmada-1.kairship.example.com", "kairship.example.com"),
            ("karmada-1.kairship.example.com", "evil.example.org"),
        ] {
            let e = h.instance_of(Some(sni), Some(host)).expect_err(host);
            assert_eq!(e.http_status(), 421, "{sni} / {host}");
            assert!(e.to_string().contains(host), "{e}");
        }
    }

    #[test]
    fn a_name_under_the_domain_that_cannot_be_an_instance() {
        let e = hosts()
            .instance_of(None, Some("a.b.kairship.example.com"))
            .expect_err("two labels");
        assert!(e.to_string().contains("not an instance's host"), "{e}");
    }

    #[test]
    fn domains_that_are_refused() {
        for d in ["", "*.kairship.io", "bad_domain.io", "a..b"] {
            assert!(InstanceHosts::new(d).is_err(), "{d:?}");
        }
        let h = hosts();
        assert_eq!(h.domain(), "kairship.example.com");
        assert_eq!(h.host_of("x"), "x.kairship.example.com");
        assert_eq!(h.wildcard(), "*.kairship.example.com");
    }
}
