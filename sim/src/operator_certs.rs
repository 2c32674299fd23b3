//! The certificate Secret karmada-operator writes for a control plane
//! (`<name>-karmada-cert`, or `<name>-cert` when the name already says karmada): its three
//! CAs and five leaves as `<name>.crt` and `<name>.key`, so the certificates a managed
//! instance lists and Kairship's renewal find what they find with the real operator. The
//! real one's keys are RSA; these are ECDSA P-256 (ring generates no RSA keys). Leaves
//! last a year, the CAs ten, as the operator's do. Like the operator, an existing Secret
//! is kept as it is.

use base64::Engine;
use serde_json::{json, Map, Value};

/// The Secret's name for Karmada object `name` (`generateResourceName`).
pub fn secret_name(name: &str) -> String {
    match name.contains("karmada") {
        true => format!("{name}-cert"),
        false => format!("{name}-karmada-cert"),
    }
}

const LEAVES: [(&str, &str, &str); 5] = [
    ("apiserver", "ca", "karmada-apiserver"),
    ("karmada", "ca", "system:admin"),
    ("front-proxy-client", "front-proxy-ca", "front-proxy-client"),
    ("etcd-server", "etcd-ca", "karmada-etcd-server"),
    ("etcd-client", "etcd-ca", "karmada-etcd-client"),
];

/// The Secret of Karmada object `name` in `ns`.
pub fn secret(ns: &str, name: &str) -> Result<Value, rcgen::Error> {
    let b64 = |s: String| Value::String(base64::engine::general_purpose::STANDARD.encode(s));
    let now = rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(unix_now());
    let year = std::time::Duration::from_secs(365 * 86_400);
    let mut data = Map::new();
    let mut cas = Vec::new();
    for ca in ["ca", "front-proxy-ca", "etcd-ca"] {
        let key = rcgen::KeyPair::generate()?;
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
        p.distinguished_name.push(rcgen::DnType::CommonName, ca);
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        p.not_before = now;
        p.not_after = now + year * 10;
        let cert = p.self_signed(&key)?;
        data.insert(format!("{ca}.crt"), b64(cert.pem()));
        data.insert(format!("{ca}.key"), b64(key.serialize_pem()));
        cas.push((ca, p, key));
    }
    for (leaf, ca, cn) in LEAVES {
        let Some((_, cp, ck)) = cas.iter().find(|(n, _, _)| *n == ca) else {
            continue;
        };
        let issuer = rcgen::Issuer::from_params(cp, ck);
        let key = rcgen::KeyPair::generate()?;
        let mut p = rcgen::CertificateParams::new(vec![
            format!("{name}-apiserver.{ns}.svc"),
            "localhost".to_string(),
        ])?;
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        if leaf == "karmada" {
            p.distinguished_name
                .push(rcgen::DnType::OrganizationName, "system:masters");
        }
        p.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.not_before = now;
        p.not_after = now + year;
        let cert = p.signed_by(&key, &issuer)?;
        data.insert(format!("{leaf}.crt"), b64(cert.pem()));
        data.insert(format!("{leaf}.key"), b64(key.serialize_pem()));
    }
    Ok(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret_name(name), "namespace": ns},
        "data": Value::Object(data),
    }))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
