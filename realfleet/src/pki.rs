//! Certificates and keys of a real control plane, written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

fn pki(e: impl std::fmt::Display) -> Error {
    Error::Pki(e.to_string())
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, Error> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))?;
    Ok(path)
}

/// A serving certificate (own CA, for localhost and 127.0.0.1) as files.
pub struct Serving {
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

pub fn serving(dir: &Path, name: &str) -> Result<Serving, Error> {
    serving_for(dir, name, &[])
}

/// A serving certificate also valid for `extra` DNS names (a Service's name, which the
/// aggregator checks when it dials an APIService).
pub fn serving_for(dir: &Path, name: &str, extra: &[&str]) -> Result<Serving, Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.distinguished_name
        .push(DnType::CommonName, format!("{name}-ca"));
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(pki)?).map_err(pki)?;
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    names.extend(extra.iter().map(|n| n.to_string()));
    let mut leaf = CertificateParams::new(names).map_err(pki)?;
    leaf.distinguished_name.push(DnType::CommonName, name);
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(pki)?;
    let cert = leaf.signed_by(&key, &ca).map_err(pki)?;
    // The CA's key signs client certificates too: kube-controller-manager's csrsigning
    // issues karmada-agent's from it (Pull mode), as karmadactl init's CA does.
    write(dir, "ca.key", &ca.key().serialize_pem())?;
    Ok(Serving {
        ca_file: write(dir, "ca.crt", &ca.pem())?,
        cert_file: write(dir, "serving.crt", &cert.pem())?,
        key_file: write(dir, "serving.key", &key.serialize_pem())?,
        ca_pem: ca.pem(),
    })
}

/// The aggregation layer's front proxy: a CA the aggregated API servers trust for request
/// headers, and the client certificate kube-apiserver presents to them.
pub struct FrontProxy {
    pub ca_file: PathBuf,
    pub client_cert_file: PathBuf,
    pub client_key_file: PathBuf,
}

pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

pub fn front_proxy(dir: &Path) -> Result<FrontProxy, Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.distinguished_name
        .push(DnType::CommonName, "front-proxy-ca");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(pki)?).map_err(pki)?;
    let mut leaf = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
    leaf.distinguished_name
        .push(DnType::CommonName, FRONT_PROXY_CLIENT);
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(pki)?;
    let cert = leaf.signed_by(&key, &ca).map_err(pki)?;
    Ok(FrontProxy {
        ca_file: write(dir, "front-proxy-ca.crt", &ca.pem())?,
        client_cert_file: write(dir, "front-proxy-client.crt", &cert.pem())?,
        client_key_file: write(dir, "front-proxy-client.key", &key.serialize_pem())?,
    })
}

/// The key pair that signs and verifies service-account tokens (ECDSA P-256, PEM):
/// (private key file, public key file).
pub fn service_account_key(dir: &Path) -> Result<(PathBuf, PathBuf), Error> {
    let key = KeyPair::generate().map_err(pki)?;
    Ok((
        write(dir, "sa.key", &key.serialize_pem())?,
        write(dir, "sa.pub", &key.public_key_pem())?,
    ))
}

/// A random bearer token.
pub fn token() -> String {
    use rand::Rng;
    let b: [u8; 24] = rand::rng().random();
    b.iter().map(|x| format!("{x:02x}")).collect()
}
