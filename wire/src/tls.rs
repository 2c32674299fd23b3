//! Self-signed certificate authorities and serving certificates (rcgen, ring), and the
//! rustls server configuration built from them.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("building TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A CA plus one serving certificate signed by it, for loopback names.
#[derive(Clone)]
pub struct ServingCert {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

/// The ring provider, explicitly, so no process-wide default has to be installed.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Generates a fresh CA named `common_name` and a certificate for `localhost`/127.0.0.1.
pub fn generate(common_name: &str) -> Result<ServingCert, TlsError> {
    generate_for(common_name, &[])
}

/// How long generated certificates are valid, as kubeadm and Karmada's installers issue
/// them: the CA ten years, the serving certificate one.
pub const CA_VALIDITY: time::Duration = time::Duration::days(3650);
pub const SERVING_VALIDITY: time::Duration = time::Duration::days(365);

/// As [`generate`], the certificate also valid for `extra` names and addresses (a
/// Service's DNS names and cluster IP).
pub fn generate_for(common_name: &str, extra: &[String]) -> Result<ServingCert, TlsError> {
    issue(common_name, extra)?.serving()
}

/// As [`generate_for`], without a server configuration.
pub fn issue(common_name: &str, extra: &[String]) -> Result<Issued, TlsError> {
    // An hour back, for clocks a little behind.
    let now = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.not_before = now;
    ca_params.not_after = now + CA_VALIDITY;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{common_name}-ca"));
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    names.extend(extra.iter().cloned());
    let mut leaf = CertificateParams::new(names)?;
    leaf.not_before = now;
    leaf.not_after = now + SERVING_VALIDITY;
    leaf.distinguished_name
        .push(DnType::CommonName, common_name.to_string());
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate()?;
    let cert = leaf.signed_by(&leaf_key, &ca)?;
    Ok(Issued {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: leaf_key.serialize_pem(),
        chain: vec![cert.der().clone(), ca.der().clone()],
        key_der: leaf_key.serialize_der(),
    })
}

/// A CA and a serving certificate signed by it, before any TLS configuration is built:
/// servers behind one shared listener need only the [`CertifiedKey`], not a configuration
/// (and a session cache) each.
///
/// [`CertifiedKey`]: rustls::sign::CertifiedKey
pub struct Issued {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// The serving certificate, then the CA.
    pub chain: Vec<CertificateDer<'static>>,
    key_der: Vec<u8>,
}

impl Issued {
    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }

    /// The chain and key as rustls serves them, for a resolver that picks by name.
    pub fn certified_key(&self) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
        Ok(Arc::new(rustls::sign::CertifiedKey::from_der(
            self.chain.clone(),
            self.key(),
            &provider(),
        )?))
    }

    /// A server configuration of its own.
    pub fn serving(self) -> Result<ServingCert, TlsError> {
        let server_config = server_config(self.chain.clone(), self.key())?;
        Ok(ServingCert {
            ca_pem: self.ca_pem,
            cert_pem: self.cert_pem,
            key_pem: self.key_pem,
            server_config,
        })
    }
}

/// One DER certificate as a PEM block.
pub fn pem_certificate(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// A rustls server configuration offering HTTP/2 and HTTP/1.1, its certificate chosen
/// per connection by `resolver` (by the server name the client asked for, say).
pub fn server_config_resolving(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves one certificate whatever name the client asks for.
#[derive(Debug)]
pub struct FixedKey(pub Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for FixedKey {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A rustls server configuration offering HTTP/2 and HTTP/1.1.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
