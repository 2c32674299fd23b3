//! The kubeconfigs Kairship hands out (`InstanceService.GetKubeconfig`, `kairship ctl
//! kubeconfig`, the console's download): one cluster, one user, one context, for one
//! instance through Kairship.
//!
//! The server is where the caller reaches Kairship's HTTPS port: the request's own
//! `server`, else `--external-url`, else the address the request was sent to (a request
//! on the gRPC port: its host with the HTTPS port). Where Kairship serves each instance at
//! `<instance>.<domain>`, the host form is the default: reached by a name, the server is
//! the instance's host on the same port (the name's wildcard must resolve to Kairship, as
//! the chart's `instanceDomain` asks); reached by an address (which names no host), the
//! server keeps the path form and names the host as `tls-server-name`, so `get --raw`
//! still reaches the instance with no DNS at all (the demo's form).

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;

use crate::api::instance_hosts::{host_of, InstanceHosts};
use crate::error::ApiError;

/// Where a request reached Kairship: an extension of every request, set by the port's
/// outermost layer (and carried by REST into the method it calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// The `Host` (or `:authority`) the request was sent to.
    pub host: Option<String>,
    /// On the gRPC port: the HTTPS port, which kubeconfigs name instead of this one.
    pub https_port: Option<u16>,
}

/// Marks each request with where it reached Kairship: `https_port` is `None` on the
/// HTTPS port, the HTTPS port's number on the gRPC port.
pub async fn mark(https_port: Option<u16>, mut req: Request, next: Next) -> Response {
    let host = host_of(&req).map(str::to_string);
    req.extensions_mut().insert(Reached { host, https_port });
    next.run(req).await
}

/// Kairship's HTTPS address as clients reach it: `https://` and a host, with a port
/// unless it is 443. No path, no user, no query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// `name`, `1.2.3.4` or `[::1]`.
    host: String,
    port: Option<u16>,
}

/// What a server URL given fails to be.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("server {0:?}: {1}")]
pub struct ServerUrlError(String, &'static str);

impl ServerUrl {
    pub fn parse(s: &str) -> Result<Self, ServerUrlError> {
        let err = |why| ServerUrlError(s.to_string(), why);
        let rest = s
            .strip_prefix("https://")
            .ok_or_else(|| err("must start with https:// (Kairship serves HTTPS only)"))?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
            return Err(err(
                "must be https://host[:port] with no path, user or query",
            ));
        }
        Self::of_authority(authority).ok_or_else(|| err("its host or port is not valid"))
    }

    /// `host[:port]` as a `Host` header carries it.
    fn of_authority(authority: &str) -> Option<Self> {
        let a: http::uri::Authority = authority.parse().ok()?;
        let host = a.host().to_ascii_lowercase();
        let valid = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
        valid.then_some(Self {
            host,
            port: a.port_u16().filter(|p| *p != 443),
        })
    }

    fn with_port(mut self, port: u16) -> Self {
        self.port = Some(port).filter(|p| *p != 443);
        self
    }

    /// Whether the host is an address (or `localhost`): a TLS server name it cannot be.
    fn is_address(&self) -> bool {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        bare.parse::<std::net::IpAddr>().is_ok() || bare == "localhost"
    }

    fn url_for(&self, host: &str) -> String {
        match self.port {
            Some(p) => format!("https://{host}:{p}"),
            None => format!("https://{host}"),
        }
    }

    pub fn url(&self) -> String {
        self.url_for(&self.host)
    }
}

/// How a kubeconfig reaches its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The instance's own host (`--instance-domain`).
    Host,
    /// Kairship's address with the instance's proxy path.
    Path,
}

impl Form {
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Host => "host",
            Form::Path => "path",
        }
    }
}

/// What Kairship knows for the kubeconfigs it hands out (flags, fixed at start).
#[derive(Debug, Clone, Default)]
pub struct Issuer {
    /// `--external-url`.
    pub external: Option<ServerUrl>,
    /// `--kubeconfig-ca-file`: the CA clients verify Kairship's HTTPS certificate with.
    pub ca_pem: Option<String>,
    /// `--instance-domain`.
    pub hosts: Option<Arc<InstanceHosts>>,
}

/// One request for a kubeconfig.
#[derive(Debug, Default)]
pub struct Ask<'a> {
    pub instance: &'a str,
    /// "", "host" or "path".
    pub form: &'a str,
    /// "" or an https URL.
    pub server: &'a str,
    /// The caller's own bearer token, to put in, when asked for.
    pub token: Option<&'a str>,
}

/// A kubeconfig and how it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Issued {
    pub config: Value,
    pub server: String,
    pub tls_server_name: Option<String>,
    pub form: Form,
}

impl Issuer {
    /// The kubeconfig `ask` wants, for a request that reached Kairship as `reached` says.
    pub fn issue(&self, ask: &Ask<'_>, reached: Option<&Reached>) -> Result<Issued, ApiError> {
        let invalid = |field: &str, message: String| ApiError::InvalidArgument {
            field: field.into(),
            message,
        };
        let base = match ask.server {
            "" => self.external.clone().or_else(|| from_request(reached)),
            s => Some(ServerUrl::parse(s).map_err(|e| invalid("server", e.to_string()))?),
        }
        .ok_or_else(|| {
            invalid(
                "server",
                "Kairship cannot tell where you reach it: give server (https://host[:port]), or start Kairship with --external-url".into(),
            )
        })?;
        let form = match (ask.form, &self.hosts) {
            ("" | "host", Some(_)) => Form::Host,
            ("host", None) => {
                return Err(ApiError::FailedPrecondition(
                    "form host: Kairship serves no instance hosts (start it with --instance-domain); ask for form path".into(),
                ))
            }
            ("" | "path", _) => Form::Path,
            (other, _) => {
                return Err(invalid(
                    "form",
                    format!("{other:?} is not a form: host or path"),
                ))
            }
        };
        let path_server = format!(
            "{}{}/instances/{}/proxy",
            base.url(),
            crate::api::API_PREFIX,
            ask.instance
        );
        let (server, tls_server_name) = match (form, &self.hosts) {
            (Form::Host, Some(hosts)) if base.is_address() => {
                (path_server, Some(hosts.host_of(ask.instance)))
            }
            (Form::Host, Some(hosts)) => (base.url_for(&hosts.host_of(ask.instance)), None),
            _ => (path_server, None),
        };
        let mut config = kairship_wire::kubeconfig::build_with(
            &format!("kairship-{}", ask.instance),
            &server,
            self.ca_pem.as_deref(),
            ask.token,
        );
        if let Some(n) = &tls_server_name {
            config = kairship_wire::kubeconfig::with_tls_server_name(config, n);
        }
        Ok(Issued {
            config,
            server,
            tls_server_name,
            form,
        })
    }
}

/// The server a request was sent to, when it says.
fn from_request(reached: Option<&Reached>) -> Option<ServerUrl> {
    let r = reached?;
    let url = ServerUrl::of_authority(r.host.as_deref()?)?;
    Some(match r.https_port {
        Some(port) => url.with_port(port),
        None => url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn issuer(domain: bool) -> Issuer {
        Issuer {
            external: None,
            ca_pem: Some("PEM".into()),
            hosts: domain.then(|| Arc::new(InstanceHosts::new("k.example.com").expect("domain"))),
        }
    }

    fn reached(host: &str, https_port: Option<u16>) -> Reached {
        Reached {
            host: Some(host.into()),
            https_port,
        }
    }

    fn ask(form: &'static str, server: &'static str) -> Ask<'static> {
        Ask {
            instance: "prod-eu",
            form,
            server,
            token: None,
        }
    }

    #[test]
    fn reached_by_a_name_the_host_form_is_the_instance_host_on_that_port() {
        let i = issuer(true).issue(
            &ask("", ""),
            Some(&reached("kairship.k.example.com:8443", None)),
        );
        let i = i.expect("issued");
        assert_eq!(i.server, "https://prod-eu.k.example.com:8443");
        assert_eq!(i.tls_server_name, None);
        assert_eq!(i.form, Form::Host);
        assert_eq!(
            i.config["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
        assert_eq!(i.config["users"][0]["user"], json!({}));
    }

    #[test]
    fn reached_by_an_address_the_host_form_keeps_the_path_and_names_the_host() {
        for host in ["127.0.0.1:9443", "[::1]:9443", "localhost:9443"] {
            let i = issuer(true)
                .issue(&ask("", ""), Some(&reached(host, None)))
                .expect("issued");
            let base = host.split_at(host.rfind(':').expect("port")).0;
            assert_eq!(
                i.server,
                format!("https://{base}:9443/apis/kairship.io/v1alpha1/instances/prod-eu/proxy")
            );
            assert_eq!(i.tls_server_name.as_deref(), Some("prod-eu.k.example.com"));
        }
    }

    #[test]
    fn the_grpc_port_names_the_https_port_and_443_is_left_out() {
        let i = issuer(false)
            .issue(
                &ask("", ""),
                Some(&reached("kairship.svc:50051", Some(443))),
            )
            .expect("issued");
        assert_eq!(
            i.server,
            "https://kairship.svc/apis/kairship.io/v1alpha1/instances/prod-eu/proxy"
        );
        assert_eq!(i.form, Form::Path);
    }

    #[test]
    fn the_server_asked_for_wins_over_external_url_which_wins_over_the_request() {
        let mut with_external = issuer(false);
        with_external.external =
            Some(ServerUrl::parse("https://outside.example:7443/").expect("url"));
        let r = reached("inside:1", None);
        let i = with_external
            .issue(&ask("path", ""), Some(&r))
            .expect("issued");
        assert!(
            i.server.starts_with("https://outside.example:7443/apis/"),
            "{}",
            i.server
        );
        let i = with_external
            .issue(&ask("path", "https://mine.example"), Some(&r))
            .expect("issued");
        assert!(
            i.server.starts_with("https://mine.example/apis/"),
            "{}",
            i.server
        );
    }

    #[test]
    fn bad_asks_are_refused_naming_the_field() {
        let r = reached("kairship:1", None);
        let field = |e: ApiError| match e {
            ApiError::InvalidArgument { field, .. } => field,
            other => panic!("{other:?}"),
        };
        for s in [
            "http://x",
            "https://x/path",
            "https://u@x",
            "https://",
            "https://x?y",
        ] {
            let e = issuer(true).issue(&ask("", s), Some(&r)).expect_err(s);
            assert_eq!(field(e), "server", "{s}");
        }
        let e = issuer(true)
            .issue(&ask("both", ""), Some(&r))
            .expect_err("form");
        assert_eq!(field(e), "form");
        assert!(matches!(
            issuer(false).issue(&ask("host", ""), Some(&r)),
            Err(ApiError::FailedPrecondition(_))
        ));
        assert_eq!(
            field(
                issuer(false)
                    .issue(&ask("", ""), None)
                    .expect_err("no server")
            ),
            "server"
        );
    }

    #[test]
    fn the_token_goes_in_only_when_given() {
        let a = Ask {
            token: Some("t0k"),
            ..ask("path", "https://k")
        };
        let i = issuer(false).issue(&a, None).expect("issued");
        assert_eq!(i.config["users"][0]["user"]["token"], "t0k");
        assert_eq!(i.config["current-context"], "kairship-prod-eu");
    }
}
