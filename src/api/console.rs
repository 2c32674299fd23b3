//! The console at `/ui/`: the committed build of `ui/` (embedded by build.rs), served on
//! the HTTPS address beside REST, so it needs no server of its own and calls REST from
//! the same origin. Unauthenticated like any static page: every call it makes carries the
//! user's token, and REST decides what they see.

use axum::extract::Path;
use axum::response::{IntoResponse, Redirect, Response};
use http::{header, HeaderValue, StatusCode};

/// `(path under ui/dist, bytes)`.
const ASSETS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));

pub const PREFIX: &str = "/ui";

/// `/ui/config.json`: where the console sends a browser to sign in (the OIDC issuer and
/// client id Kairship trusts), or `{"oidc": null}` for token sign-in alone. Public, as the
/// page itself: it names the provider, which its login page names anyway.
pub async fn config(
    axum::extract::State(ctx): axum::extract::State<crate::api::context::ApiContext>,
) -> Response {
    let oidc = ctx.auth.oidc_provider().map(|(issuer, client_id)| {
        serde_json::json!({"issuer": issuer, "clientId": client_id,
                           "scopes": ["openid", "email", "profile", "groups"]})
    });
    let mut r = axum::Json(serde_json::json!({ "oidc": oidc })).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

pub async fn redirect() -> Redirect {
    Redirect::permanent("/ui/")
}

pub async fn index(
    axum::extract::State(ctx): axum::extract::State<crate::api::context::ApiContext>,
) -> Response {
    with_policy(asset("index.html"), &ctx)
}

pub async fn file(
    axum::extract::State(ctx): axum::extract::State<crate::api::context::ApiContext>,
    Path(path): Path<String>,
) -> Response {
    with_policy(asset(&path), &ctx)
}

/// The page's Content-Security-Policy: its own scripts only (no inline or injected ones),
/// calls to Kairship and to the OIDC provider it signs in with, pictures from itself and
/// the blobs it makes, and no framing. Inline style attributes stay allowed (the tree's
/// indentation and the usage bars are set that way); they cannot run code.
fn policy(issuer: Option<&str>) -> String {
    let origin = issuer
        .and_then(|i| i.parse::<http::Uri>().ok())
        .and_then(|u| Some(format!("{}://{}", u.scheme_str()?, u.authority()?)))
        .map(|o| format!(" {o}"))
        .unwrap_or_default();
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; connect-src 'self'{origin}; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

fn with_policy(mut r: Response, ctx: &crate::api::context::ApiContext) -> Response {
    let html = r
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if html {
        let issuer = ctx.auth.oidc_provider().map(|(i, _)| i);
        if let Ok(v) = HeaderValue::from_str(&policy(issuer.as_deref())) {
            r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
        }
        r.headers_mut()
            .insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        r.headers_mut().insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    r
}

/// The file at `path`, or index.html for any other path (the console routes in the page).
fn asset(path: &str) -> Response {
    let found = ASSETS.iter().find(|(p, _)| *p == path);
    let (path, bytes) = match found {
        Some(hit) => *hit,
        // A missing hashed asset is a 404: index.html in its place would be parsed as JS.
        None if path.starts_with("assets/") => {
            return (StatusCode::NOT_FOUND, "no such console asset").into_response()
        }
        None => match ASSETS.iter().find(|(p, _)| *p == "index.html") {
            Some(hit) => *hit,
            None => return (StatusCode::NOT_FOUND, "the console is not built").into_response(),
        },
    };
    // Vite names assets by content hash, so they never change; index.html must be re-read.
    let cache = match path.starts_with("assets/") {
        true => "public, max-age=31536000, immutable",
        false => "no-cache",
    };
    let mut r = bytes.into_response();
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") | Some("mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

pub async fn openapi() -> Response {
    match crate::api::openapi::document_text() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_get_the_page_and_missing_assets_a_404() {
        assert_eq!(asset("instances/karmada-1").status(), StatusCode::OK);
        assert_eq!(
            asset("instances/karmada-1").headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(asset("assets/nope.js").status(), StatusCode::NOT_FOUND);
        assert_eq!(
            content_type("assets/index-abc.js"),
            "text/javascript; charset=utf-8"
        );
    }
}
