//! HTTP clients Kairship opens to services beside the fleet (an OIDC provider's JWKS,
//! Prometheus): rustls with the ring provider, HTTP/1.1, trusting the roots given.

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

/// A client for requests without a body.
pub type Client = hyper_util::client::legacy::Client<
    HttpsConnector<HttpConnector>,
    http_body_util::Empty<bytes::Bytes>,
>;

/// A client trusting `roots`; `https_only` refuses plain `http://` addresses.
pub fn client(roots: rustls::RootCertStore, https_only: bool) -> Result<Client, rustls::Error> {
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls);
    let connector = match https_only {
        true => builder.https_only().enable_http1().build(),
        false => builder.https_or_http().enable_http1().build(),
    };
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector),
    )
}

/// The system's trusted certificates (those that fail to load are logged and skipped).
pub fn native_roots() -> Vec<rustls::pki_types::CertificateDer<'static>> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "loading the system's trusted certificates");
    }
    found.certs
}
