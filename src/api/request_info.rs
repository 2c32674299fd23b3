//! One decoded request: what every layer after the edge reads of a request (its surface,
//! the instance and path it reaches through the proxy, whether it watches, follows or
//! otherwise stays open), computed once, at the edge (`api::serve`), from the path as the
//! handler will use it.
//!
//! The edge first makes the path canonical, so authorization, audit, the limits and the
//! handler cannot disagree about it: percent-escapes are decoded, and a path that would
//! decode into something else than a plain path is refused (400) rather than guessed at,
//! as an encoded `/` (`pods/x%2Fexec` was authorized as a `get` and executed as an
//! exec), an encoded `?` or `#` (`configmaps%3Fwatch=1` reached the instance as a watch),
//! `.` and `..` segments, empty segments (`//`), control characters, whitespace,
//! backslashes and non-ASCII bytes. After the edge the path holds no `%` at all. Query
//! flags are read as kube-apiserver reads them: the first value of a repeated key.

use std::borrow::Cow;

use crate::api::instance_hosts::InstanceHosts;
use crate::error::ApiError;

/// Where a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Grpc,
    Rest,
    Proxy,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::Rest => "rest",
            Self::Proxy => "proxy",
        }
    }

    /// gRPC by its content type (on either port), the proxy by its path, REST (and the
    /// other JSON routes) otherwise.
    pub fn of<B>(req: &http::Request<B>) -> Self {
        let grpc = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        if grpc {
            return Self::Grpc;
        }
        match proxied(req.uri().path()) {
            Some(_) => Self::Proxy,
            None => Self::Rest,
        }
    }
}

/// The instance and the path on it of a proxied request
/// (`/apis/kairship.io/v1alpha1/instances/{name}/proxy{path}`).
pub fn proxied(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix(crate::api::API_PREFIX)?;
    let rest = rest.strip_prefix("/instances/")?;
    let (name, after) = rest.split_once('/')?;
    let on = after.strip_prefix("proxy")?;
    match on {
        "" => Some((name, "/")),
        p if p.starts_with('/') => Some((name, p)),
        _ => None,
    }
}

/// What the layers and handlers read of a request, computed once at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    pub surface: Surface,
    /// Through the proxy: the instance, and the path on it.
    pub proxied: Option<(String, String)>,
    /// A watch (`watch` set in the query, or a `/watch/` path).
    pub watching: bool,
    /// `follow` set in the query (a log that follows).
    pub following: bool,
    /// It stays open: see [`long_running`].
    pub long_running: bool,
}

impl RequestInfo {
    /// The request's info: the one the edge computed, or (for a request that did not pass
    /// the edge, as in unit tests) computed now from the same rules.
    pub fn of<B>(req: &http::Request<B>) -> RequestInfo {
        match req.extensions().get::<RequestInfo>() {
            Some(i) => i.clone(),
            None => Self::read(req),
        }
    }

    /// The request's surface, as [`RequestInfo::of`] says it, without copying the rest.
    pub fn surface_of<B>(req: &http::Request<B>) -> Surface {
        match req.extensions().get::<RequestInfo>() {
            Some(i) => i.surface,
            None => Surface::of(req),
        }
    }

    fn read<B>(req: &http::Request<B>) -> RequestInfo {
        let path = req.uri().path();
        let query = req.uri().query().unwrap_or_default();
        let proxied = proxied(path).map(|(i, on)| (i.to_string(), on.to_string()));
        let on = proxied.as_ref().map_or("", |(_, on)| on.as_str());
        let watching = proxied.is_some() && (on.contains("/watch/") || flag(query, "watch"));
        let following = flag(query, "follow");
        RequestInfo {
            surface: Surface::of(req),
            long_running: long_running(path, proxied.is_some(), on, watching, following),
            proxied,
            watching,
            following,
        }
    }
}

/// Requests that stay open: watches (query or `/watch/` path), followed logs, exec,
/// attach and port-forward through the proxy, pod logs over gRPC (and followed ones over
/// REST), and gRPC reflection's stream.
fn long_running(path: &str, proxied: bool, on: &str, watching: bool, following: bool) -> bool {
    // A pod's log, which may follow: over gRPC the flag is in the message, so every log
    // read counts as long-running; over REST, a followed one.
    if path.starts_with("/grpc.reflection.")
        || path == "/kairship.v1alpha1.WorkloadService/GetPodLogs"
        || path == "/kairship.v1alpha1.InstanceService/GetComponentLogs"
    {
        return true;
    }
    if path.starts_with(crate::api::API_PREFIX) && path.ends_with("/log") && !proxied {
        return following;
    }
    if !proxied {
        return false;
    }
    let last = on.rsplit('/').next().unwrap_or_default();
    matches!(last, "exec" | "attach" | "portforward") || watching || following
}

/// Whether `name` is set true in `query` (anything but `0`/`false`, as kube-apiserver
/// reads a boolean), by its first value, as Go's `url.Values.Get` reads a repeated key.
pub fn flag(query: &str, name: &str) -> bool {
    first(query, name).is_some_and(|v| parse_bool(&v) == Some(true))
}

/// A query boolean as kube-apiserver reads it: anything but `0` or `false` is true.
pub fn parse_bool(v: &str) -> Option<bool> {
    Some(!(v == "0" || v.eq_ignore_ascii_case("false")))
}

/// The first value of `name` in `query`, decoded.
pub fn first(query: &str, name: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// Kairship's own API group's paths, served as they are on an instance's host too.
const KAIRSHIP_APIS: &str = "/apis/kairship.io/";

/// Where a request arrived: the instance hosts served there (if any) and the TLS server
/// name its connection was opened with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Edge<'a> {
    pub hosts: Option<&'a InstanceHosts>,
    pub sni: Option<&'a str>,
}

/// A request the edge refuses, and the surface to answer it in.
#[derive(Debug)]
pub struct Refused {
    pub surface: Surface,
    pub error: ApiError,
}

/// `req` with its path made canonical (and, sent to an instance's host, turned into the
/// proxy's path form) and its info attached, or why it is refused.
pub fn at_edge<B>(mut req: http::Request<B>, edge: Edge<'_>) -> Result<http::Request<B>, Refused> {
    let mut surface = Surface::of(&req);
    let refused = |surface, error| Refused { surface, error };
    let canonical = canonical_path(req.uri().path()).map_err(|e| refused(surface, e))?;
    let mut path = match canonical {
        Cow::Owned(p) => Some(p),
        Cow::Borrowed(_) => None,
    };
    if let (Some(hosts), false) = (edge.hosts, surface == Surface::Grpc) {
        let host = crate::api::instance_hosts::host_of(&req);
        // Refused only when a name is an instance's: answered as the proxy answers.
        let instance = hosts
            .instance_of(edge.sni, host)
            .map_err(|e| refused(Surface::Proxy, e))?;
        if let Some(instance) = instance {
            let now = path.as_deref().unwrap_or(req.uri().path());
            path = match proxied(now) {
                // Already in the path form (a kubeconfig with both): the same instance.
                Some((named, _)) if named == instance => path,
                Some((named, _)) => {
                    return Err(refused(
                        Surface::Proxy,
                        ApiError::Misdirected(format!(
                            "this connection is for instance {instance:?}, the path for {named:?}"
                        )),
                    ))
                }
                // Kairship's own API answers on every name it serves (no Karmada instance
                // serves kairship.io): a client of its REST API may reuse an instance's
                // kubeconfig, server name included.
                None if now.starts_with(KAIRSHIP_APIS) => path,
                None => {
                    surface = Surface::Proxy;
                    Some(format!(
                        "{}/instances/{instance}/proxy{now}",
                        crate::api::API_PREFIX
                    ))
                }
            };
        }
    }
    if let Some(path) = path {
        let path_and_query = match req.uri().query() {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        let mut parts = req.uri().clone().into_parts();
        let unreadable = |e: String| ApiError::invalid("path", format!("cannot be read: {e}"));
        parts.path_and_query = Some(
            path_and_query
                .parse()
                .map_err(|e: http::uri::InvalidUri| refused(surface, unreadable(e.to_string())))?,
        );
        *req.uri_mut() = http::Uri::from_parts(parts)
            .map_err(|e| refused(surface, unreadable(e.to_string())))?;
    }
    let info = RequestInfo::read(&req);
    req.extensions_mut().insert(info);
    Ok(req)
}

/// `raw` with its percent-escapes decoded (borrowed when it has none), or why it is not a
/// plain path.
pub fn canonical_path(raw: &str) -> Result<Cow<'_, str>, ApiError> {
    let refuse = |why: &str| ApiError::invalid("path", format!("{why}; send the path plainly"));
    if !raw.starts_with('/') {
        return Err(refuse("must begin with /"));
    }
    let lower = raw.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") {
        return Err(refuse("holds an encoded / or \\"));
    }
    let decoded: Cow<'_, str> = match raw.contains('%') {
        false => Cow::Borrowed(raw),
        true => {
            let bytes =
                decode(raw).ok_or_else(|| refuse("holds a % that is not a percent-escape"))?;
            Cow::Owned(String::from_utf8(bytes).map_err(|_| refuse("does not decode to UTF-8"))?)
        }
    };
    if let Some(c) = decoded.chars().find(|c| {
        !c.is_ascii() || c.is_ascii_control() || c.is_ascii_whitespace() || "?#%\\".contains(*c)
    }) {
        return Err(refuse(&format!("holds {c:?} once decoded")));
    }
    let segments: Vec<&str> = decoded[1..].split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, s) in segments.iter().enumerate() {
        match *s {
            "." | ".." => return Err(refuse("holds a . or .. segment")),
            // A trailing slash is allowed (the proxy's root is `.../proxy/`).
            "" if i != last && decoded.len() > 1 => {
                return Err(refuse("holds an empty segment (//)"))
            }
            _ => {}
        }
    }
    Ok(decoded)
}

fn decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/apis/kairship.io/v1alpha1/instances/k1/proxy";

    fn info(uri: &str) -> Result<RequestInfo, ApiError> {
        let req = at_edge(
            http::Request::get(uri).body(()).expect("request"),
            Edge::default(),
        )
        .map_err(|r| r.error)?;
        Ok(RequestInfo::of(&req))
    }

    #[test]
    fn paths_are_decoded_once_or_refused() {
        assert_eq!(
            canonical_path("/api/v1/pods").ok(),
            Some(Cow::Borrowed("/api/v1/pods"))
        );
        assert_eq!(
            canonical_path("/api/v1/namespaces/d/configmaps/a%2Db")
                .ok()
                .as_deref(),
            Some("/api/v1/namespaces/d/configmaps/a-b")
        );
        assert_eq!(
            canonical_path(&format!("{P}/")).ok().as_deref(),
            Some(&*format!("{P}/"))
        );
        for bad in [
            "/api/v1/namespaces/d/pods/x%2Fexec",
            "/api/v1/namespaces/d/pods/x%2fexec",
            "/api/v1/namespaces/d/configmaps%3Fwatch=1",
            "/api/v1/namespaces/d/configmaps%23x",
            "/api/v1/namespaces/../secrets",
            "/api/v1/namespaces/%2e%2e/secrets",
            "/api/v1//secrets",
            "/api/v1/namespaces/d/configmaps/a%20b",
            "/api/v1/namespaces/d/configmaps/a%",
            "/api/v1/namespaces/d/configmaps/a%zz",
            "/api/v1/namespaces/d/configmaps/%C3%A9",
            "/api/v1/namespaces/d/configmaps/a%5Cb",
            "/api/v1/namespaces/d/configmaps/a%00",
            "/api/v1/namespaces/d/configmaps/a%25",
        ] {
            let e = canonical_path(bad).expect_err(bad);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}: {e}");
        }
    }

    #[test]
    fn the_info_is_what_the_handler_will_see() {
        // A watch named once, or twice (the first value counts, as for kube-apiserver).
        let w = info(&format!("{P}/api/v1/configmaps?watch=1&watch=0")).expect("read");
        assert!(w.watching && w.long_running);
        let w = info(&format!("{P}/api/v1/configmaps?watch=0&watch=1")).expect("read");
        assert!(!w.watching && !w.long_running);
        let w = info(&format!("{P}/api/v1/watch/configmaps")).expect("read");
        assert!(w.watching);
        // An encoded key is decoded as the instance decodes it.
        assert!(
            info(&format!("{P}/api/v1/configmaps?wat%63h=true"))
                .expect("read")
                .watching
        );
        let e = info(&format!("{P}/api/v1/namespaces/d/pods/p/exec")).expect("read");
        assert!(e.long_running && !e.watching);
        assert_eq!(
            e.proxied,
            Some(("k1".into(), "/api/v1/namespaces/d/pods/p/exec".into()))
        );
        let l = info(&format!("{P}/api/v1/namespaces/d/pods/p/log?follow=true")).expect("read");
        assert!(l.long_running && l.following);
        assert!(
            !info("/apis/kairship.io/v1alpha1/instances")
                .expect("read")
                .long_running
        );
    }
}
