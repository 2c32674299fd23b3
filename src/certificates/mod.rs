//! The certificates an instance is reached with, and when each expires: the CA and the
//! client certificate of the kubeconfig Kairship holds, the karmada-apiserver's serving
//! certificate as its TLS handshake presents it, and for a managed instance every
//! certificate karmada-operator generated (its `-cert`, `-etcd-cert` and `-webhook-cert`
//! Secrets). Read on connect and every `--certificate-check-secs` after by the
//! `certificates` controller (`controllers::certificates`), so renewals show within that;
//! the Instance status lists them, a condition turns True within the warning threshold
//! of the first expiry, and `/metrics` gives each one's seconds left.

pub mod renewal;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::crd::CertificateStatus;

/// The Instance condition: True within the warning threshold of the first expiry.
pub const CONDITION: &str = "CertificatesExpiring";
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a check needs, taken from the kubeconfig at connect time.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The karmada-apiserver's URL.
    pub endpoint: Option<http::Uri>,
    /// The name its certificate must carry (the kubeconfig's tls-server-name, else the
    /// URL's host).
    pub server_name: Option<String>,
    /// The kubeconfig's CA certificates (DER).
    pub roots: Vec<Vec<u8>>,
    /// The kubeconfig's own certificates (CA, client), read at connect time.
    pub kubeconfig: Vec<CertificateStatus>,
    /// A managed instance: the namespace and Karmada object whose operator Secrets hold
    /// the certificates it generated.
    pub operator: Option<(String, String)>,
}

/// Every certificate in `pem` (a bundle may hold several), named `name` (numbered after
/// the first). Unreadable blocks are skipped: the bundle's other certificates still count.
pub fn from_pem(name: &str, pem: &[u8]) -> Vec<CertificateStatus> {
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem).flatten() {
        if block.label != "CERTIFICATE" {
            continue;
        }
        if let Some(c) = from_der(&numbered(name, out.len()), &block.contents) {
            out.push(c);
        }
    }
    out
}

fn numbered(name: &str, index: usize) -> String {
    match index {
        0 => name.to_string(),
        i => format!("{name} #{}", i + 1),
    }
}

pub fn from_der(name: &str, der: &[u8]) -> Option<CertificateStatus> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let time = |t: i64| {
        jiff::Timestamp::from_second(t)
            .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .ok()
    };
    Some(CertificateStatus {
        name: name.to_string(),
        subject: cert.subject().to_string(),
        not_before: time(cert.validity().not_before.timestamp()),
        not_after: time(cert.validity().not_after.timestamp())?,
    })
}

/// The kubeconfig's CA(s) and client certificate.
pub fn from_config(config: &kube::Config) -> Vec<CertificateStatus> {
    let mut out = Vec::new();
    for (i, der) in config.root_cert.iter().flatten().enumerate() {
        out.extend(from_der(&numbered("kubeconfig CA", i), der));
    }
    let client = config
        .auth_info
        .client_certificate_data
        .as_ref()
        .and_then(|b64| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
        });
    if let Some(pem) = client {
        out.extend(from_pem("kubeconfig client", &pem));
    }
    out
}

/// Everything a check sees now: the kubeconfig's, the serving certificate's and the
/// operator's, sorted by expiry. A part that cannot be read is left out and logged.
pub async fn check(host: &kube::Client, inputs: &Inputs) -> Vec<CertificateStatus> {
    let mut out = inputs.kubeconfig.clone();
    match serving(inputs).await {
        Ok(found) => out.extend(found),
        Err(e) => tracing::debug!(error = %e, "the serving certificate could not be read"),
    }
    if let Some((ns, name)) = &inputs.operator {
        out.extend(operator(host, ns, name).await);
    }
    out.sort_by(|a, b| a.not_after.cmp(&b.not_after).then(a.name.cmp(&b.name)));
    out
}

/// karmada-operator's names for its certificate Secrets (`generateResourceName`).
fn operator_secrets(name: &str) -> Vec<String> {
    ["cert", "etcd-cert", "webhook-cert"]
        .iter()
        .map(|s| crate::crd::operator_certs::resource_name(name, s))
        .collect()
}

async fn operator(host: &kube::Client, ns: &str, name: &str) -> Vec<CertificateStatus> {
    let api: Api<Secret> = Api::namespaced(host.clone(), ns);
    let mut out = Vec::new();
    for secret in operator_secrets(name) {
        let got = tokio::time::timeout(HANDSHAKE_TIMEOUT, api.get_opt(&secret)).await;
        let Ok(Ok(Some(s))) = got else {
            tracing::debug!(%secret, "operator certificate Secret not readable");
            continue;
        };
        for (key, value) in s.data.unwrap_or_default() {
            if key.ends_with(".crt") {
                out.extend(from_pem(&format!("{secret}/{key}"), &value.0));
            }
        }
    }
    out
}

/// The serving certificate, read from a TLS handshake that sends nothing: the verifier
/// records what the server presents, then judges it by the kubeconfig's CA.
async fn serving(inputs: &Inputs) -> Result<Vec<CertificateStatus>, String> {
    let Some(url) = &inputs.endpoint else {
        return Ok(Vec::new());
    };
    if url.scheme_str() != Some("https") {
        return Ok(Vec::new());
    }
    let host = url.host().ok_or("the endpoint has no host")?;
    let port = url.port_u16().unwrap_or(443);
    let name = inputs
        .server_name
        .clone()
        .unwrap_or_else(|| host.trim_matches(['[', ']']).to_string());
    let server = ServerName::try_from(name).map_err(|e| e.to_string())?;
    let provider = kairship_wire::tls::provider();
    let mut roots = rustls::RootCertStore::empty();
    for der in &inputs.roots {
        let _ = roots.add(CertificateDer::from(der.clone()));
    }
    let inner = match roots.is_empty() {
        true => None,
        false => Some(
            rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .map_err(|e| e.to_string())?,
        ),
    };
    let recorder = Arc::new(Recorder {
        inner,
        provider: provider.clone(),
        seen: Mutex::new(None),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(recorder.clone())
        .with_no_client_auth();
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| e.to_string())?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        // The outcome does not matter: the certificate was recorded either way.
        let _ = connector.connect(server, tcp).await;
        Ok::<(), String>(())
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"))??;
    let seen = recorder.seen.lock().take();
    Ok(seen
        .and_then(|der| from_der("karmada-apiserver serving", &der))
        .into_iter()
        .collect())
}

#[derive(Debug)]
struct Recorder {
    inner: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    seen: Mutex<Option<Vec<u8>>>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock() = Some(end_entity.to_vec());
        match &self.inner {
            Some(v) => v.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
            // Without a CA nothing is trusted; the certificate is all this wanted.
            None => Err(rustls::Error::General("no CA to verify against".into())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The condition for `certificates` (sorted by expiry) at `now`: True once the first
/// expires within `warning`.
pub fn condition_of(
    certificates: &[CertificateStatus],
    now: jiff::Timestamp,
    warning: Duration,
) -> Option<(bool, &'static str, String)> {
    let first = certificates.first()?;
    let at: jiff::Timestamp = first.not_after.parse().ok()?;
    let left = at.as_second() - now.as_second();
    let days = left / 86_400;
    let warn = i64::try_from(warning.as_secs()).unwrap_or(i64::MAX);
    let of = match certificates.len() {
        1 => String::new(),
        n => format!(", the first of {n} to expire"),
    };
    Some(match left {
        l if l <= 0 => (
            true,
            "Expired",
            format!(
                "certificate {:?}{of} expired at {}",
                first.name, first.not_after
            ),
        ),
        l if l <= warn => (
            true,
            "ExpiresSoon",
            format!(
                "certificate {:?}{of} expires at {} (in {days} days)",
                first.name, first.not_after
            ),
        ),
        _ => (
            false,
            "NotExpiringSoon",
            format!(
                "certificate {:?}{of} expires at {} (in {days} days)",
                first.name, first.not_after
            ),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(name: &str, not_after: &str) -> CertificateStatus {
        CertificateStatus {
            name: name.into(),
            subject: "CN=x".into(),
            not_before: None,
            not_after: not_after.into(),
        }
    }

    #[test]
    fn the_first_expiry_decides_the_condition() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let month = Duration::from_secs(30 * 86_400);
        let certs = [
            cert("serving", "2026-01-20T00:00:00Z"),
            cert("ca", "2035-01-01T00:00:00Z"),
        ];
        let (on, reason, message) = condition_of(&certs, now, month).expect("a condition");
        assert!(on && reason == "ExpiresSoon", "{reason}");
        assert!(
            message.contains("\"serving\", the first of 2") && message.contains("in 19 days"),
            "{message}"
        );
        let (on, reason, _) = condition_of(&certs[1..], now, month).expect("a condition");
        assert!(!on && reason == "NotExpiringSoon");
        let (on, reason, _) =
            condition_of(&[cert("old", "2025-12-31T00:00:00Z")], now, month).expect("a condition");
        assert!(on && reason == "Expired");
        assert!(condition_of(&[], now, month).is_none());
    }

    #[test]
    fn operator_secret_names_follow_karmada_operator() {
        assert_eq!(operator_secrets("team-m")[0], "team-m-karmada-cert");
        assert_eq!(operator_secrets("my-karmada")[1], "my-karmada-etcd-cert");
    }

    #[test]
    fn a_bundle_gives_every_certificate() {
        let mk = |cn: &str| {
            let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            p.distinguished_name.push(rcgen::DnType::CommonName, cn);
            let key = rcgen::KeyPair::generate().expect("key");
            p.self_signed(&key).expect("cert").pem()
        };
        let bundle = format!("{}{}", mk("one"), mk("two"));
        let got = from_pem("kubeconfig CA", bundle.as_bytes());
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1].name, "kubeconfig CA #2");
        assert!(got[0].subject.contains("one"), "{:?}", got[0]);
        assert!(got[0].not_after > got[0].not_before.clone().unwrap_or_default());
        assert!(from_pem("x", b"not a certificate").is_empty());
    }
}
