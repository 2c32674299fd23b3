//! karmada-operator's certificate Secret of a managed instance (`<base>-cert`, every CA and
//! leaf as `<name>.crt` and `<name>.key`) and the renewal of its leaf certificates. The
//! operator (v1.18) never renews them: it reuses whatever that Secret holds and regenerates
//! everything, CAs included, only when the Secret is gone, which would break every client
//! that trusts the old CAs. So each leaf is re-signed here by the CA that signed it, with
//! the same subject, names, usages and key (karmada.key also signs the instance's service
//! account tokens), valid as long as before from now, and never past its CA. The CAs are
//! not renewed; they last ten years.

use std::collections::BTreeMap;

use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// The leaf certificates of the Secret, each with the CA that signs it.
pub const LEAVES: &[(&str, &str)] = &[
    ("apiserver", "ca"),
    ("karmada", "ca"),
    ("front-proxy-client", "front-proxy-ca"),
    ("etcd-server", "etcd-ca"),
    ("etcd-client", "etcd-ca"),
];

/// karmada-operator's name for one of an instance's objects (`generateResourceName`).
pub fn resource_name(karmada: &str, suffix: &str) -> String {
    match karmada.contains("karmada") {
        true => format!("{karmada}-{suffix}"),
        false => format!("{karmada}-karmada-{suffix}"),
    }
}

/// karmada-operator's certificate Secret of an instance.
pub fn secret_name(karmada: &str) -> String {
    resource_name(karmada, "cert")
}

/// A Secret's data, key by key.
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// One leaf as renewed.
#[derive(Debug, Clone, PartialEq)]
pub struct Renewed {
    pub name: String,
    /// RFC 3339.
    pub not_after: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RenewError {
    #[error("the certificate Secret has no {0:?}: karmada-operator has not finished with it")]
    Missing(String),
    #[error("{name}: {why}")]
    Unreadable { name: String, why: String },
    #[error("{ca} has expired: renewing its leaves needs a new CA, which karmada-operator makes only with a new control plane")]
    CaExpired { ca: String },
    #[error("signing {name}: {why}")]
    Signing { name: String, why: String },
}

fn pem_der(name: &str, data: &[u8]) -> Result<Vec<u8>, RenewError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(data).map_err(|e| RenewError::Unreadable {
        name: name.to_string(),
        why: format!("not a PEM certificate: {e}"),
    })?;
    Ok(pem.contents)
}

fn parsed<'a>(name: &str, der: &'a [u8]) -> Result<X509Certificate<'a>, RenewError> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, c)| c)
        .map_err(|e| RenewError::Unreadable {
            name: name.to_string(),
            why: format!("not an X.509 certificate: {e}"),
        })
}

fn key(data: &BTreeMap<String, Vec<u8>>, name: &str) -> Result<Vec<u8>, RenewError> {
    data.get(name)
        .cloned()
        .ok_or_else(|| RenewError::Missing(name.to_string()))
}

/// A signing key from PEM: PKCS #8 (`PRIVATE KEY`) as it is, or PKCS #1 (`RSA PRIVATE
/// KEY`, as karmada-operator writes its RSA keys) wrapped into PKCS #8, the one form the
/// ring backend reads.
fn signing_key(name: &str, pem: &[u8]) -> Result<rcgen::KeyPair, String> {
    let block = x509_parser::pem::Pem::iter_from_buffer(pem)
        .next()
        .ok_or_else(|| format!("{name}: no PEM block"))?
        .map_err(|e| format!("{name}: not PEM: {e}"))?;
    match block.label.as_str() {
        "PRIVATE KEY" => {
            rcgen::KeyPair::try_from(block.contents.as_slice()).map_err(|e| format!("{name}: {e}"))
        }
        "RSA PRIVATE KEY" => {
            let pkcs8 = pkcs8_of_rsa(&block.contents);
            rcgen::KeyPair::from_pkcs8_der_and_sign_algo(
                &rustls::pki_types::PrivatePkcs8KeyDer::from(pkcs8.as_slice()),
                &rcgen::PKCS_RSA_SHA256,
            )
            .map_err(|e| format!("{name}: {e}"))
        }
        other => Err(format!(
            "{name}: a {other:?} block, not a key Kairship can sign with"
        )),
    }
}

/// PKCS #8 `PrivateKeyInfo` around a PKCS #1 RSA key: version 0, rsaEncryption, the key.
fn pkcs8_of_rsa(pkcs1: &[u8]) -> Vec<u8> {
    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let n = body.len();
        if n < 0x80 {
            out.push(n as u8);
        } else {
            let bytes: Vec<u8> = n
                .to_be_bytes()
                .into_iter()
                .skip_while(|b| *b == 0)
                .collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(body);
        out
    }
    const RSA_ENCRYPTION: &[u8] = &[
        0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
    ];
    let body = [&[0x02, 0x01, 0x00][..], RSA_ENCRYPTION, &tlv(0x04, pkcs1)].concat();
    tlv(0x30, &body)
}

/// The leaf's subject, names and usages as rcgen parameters.
fn params_of(
    name: &str,
    leaf: &X509Certificate<'_>,
) -> Result<rcgen::CertificateParams, RenewError> {
    let unreadable = |why: String| RenewError::Unreadable {
        name: name.to_string(),
        why,
    };
    let mut p = rcgen::CertificateParams::default();
    let mut dn = rcgen::DistinguishedName::new();
    let mut types = std::collections::BTreeSet::new();
    for attr in leaf.subject().iter_attributes() {
        // rcgen keeps one value per type: a second O (a second group) would be lost.
        if !types.insert(attr.attr_type().to_id_string()) {
            return Err(unreadable(format!(
                "its subject {} repeats an attribute, which Kairship cannot carry over",
                leaf.subject()
            )));
        }
        let oid: Vec<u64> = attr
            .attr_type()
            .iter()
            .map(|i| i.collect())
            .ok_or_else(|| unreadable("a subject attribute's type is unreadable".into()))?;
        let value = attr
            .as_str()
            .map_err(|e| unreadable(format!("a subject attribute is not a string: {e}")))?;
        dn.push(rcgen::DnType::from_oid(&oid), value);
    }
    p.distinguished_name = dn;
    if let Ok(Some(san)) = leaf.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => p.subject_alt_names.push(rcgen::SanType::DnsName(
                    (*d).try_into()
                        .map_err(|e| unreadable(format!("DNS name {d:?}: {e}")))?,
                )),
                GeneralName::IPAddress(b) => {
                    let ip = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).map(std::net::IpAddr::from).ok(),
                        16 => <[u8; 16]>::try_from(*b).map(std::net::IpAddr::from).ok(),
                        _ => None,
                    }
                    .ok_or_else(|| unreadable("an IP address name of odd length".into()))?;
                    p.subject_alt_names.push(rcgen::SanType::IpAddress(ip));
                }
                other => {
                    return Err(unreadable(format!(
                        "a subject name Kairship cannot renew: {other:?}"
                    )))
                }
            }
        }
    }
    if let Ok(Some(ku)) = leaf.key_usage() {
        let u = ku.value;
        for (on, purpose) in [
            (
                u.digital_signature(),
                rcgen::KeyUsagePurpose::DigitalSignature,
            ),
            (
                u.key_encipherment(),
                rcgen::KeyUsagePurpose::KeyEncipherment,
            ),
            (
                u.data_encipherment(),
                rcgen::KeyUsagePurpose::DataEncipherment,
            ),
            (u.key_agreement(), rcgen::KeyUsagePurpose::KeyAgreement),
        ] {
            if on {
                p.key_usages.push(purpose);
            }
        }
    }
    if let Ok(Some(eku)) = leaf.extended_key_usage() {
        if eku.value.server_auth {
            p.extended_key_usages
                .push(rcgen::ExtendedKeyUsagePurpose::ServerAuth);
        }
        if eku.value.client_auth {
            p.extended_key_usages
                .push(rcgen::ExtendedKeyUsagePurpose::ClientAuth);
        }
    }
    p.is_ca = rcgen::IsCa::ExplicitNoCa;
    p.use_authority_key_identifier_extension = true;
    Ok(p)
}

/// The Secret's `data` with every leaf re-signed from `now` (keys and CAs unchanged), and
/// what was renewed. Nothing is returned unless every leaf could be renewed.
pub fn renew(
    data: &BTreeMap<String, Vec<u8>>,
    now: x509_parser::time::ASN1Time,
) -> Result<(SecretData, Vec<Renewed>), RenewError> {
    let now = now.to_datetime();
    let mut out = data.clone();
    let mut renewed = Vec::new();
    for (leaf_name, ca_name) in LEAVES {
        let leaf_pem = key(data, &format!("{leaf_name}.crt"))?;
        let ca_pem = key(data, &format!("{ca_name}.crt"))?;
        let ca_key = key(data, &format!("{ca_name}.key"))?;
        let leaf_der = pem_der(leaf_name, &leaf_pem)?;
        let ca_der = pem_der(ca_name, &ca_pem)?;
        let leaf = parsed(leaf_name, &leaf_der)?;
        let ca = parsed(ca_name, &ca_der)?;
        let ca_until = ca.validity().not_after.to_datetime();
        if ca_until <= now {
            return Err(RenewError::CaExpired {
                ca: ca_name.to_string(),
            });
        }
        let signing = |why: String| RenewError::Signing {
            name: leaf_name.to_string(),
            why,
        };
        let lifetime =
            leaf.validity().not_after.to_datetime() - leaf.validity().not_before.to_datetime();
        let mut params = params_of(leaf_name, &leaf)?;
        params.not_before = now;
        params.not_after = std::cmp::min(now + lifetime, ca_until);
        let ca_key = signing_key(&format!("{ca_name}.key"), &ca_key).map_err(signing)?;
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca_der.as_slice().into(), ca_key)
            .map_err(|e| signing(format!("{ca_name}.crt as an issuer: {e}")))?;
        let public = rcgen::SubjectPublicKeyInfo::from_der(leaf.public_key().raw)
            .map_err(|e| signing(format!("its public key: {e}")))?;
        let cert = params
            .signed_by(&public, &issuer)
            .map_err(|e| signing(e.to_string()))?;
        out.insert(format!("{leaf_name}.crt"), cert.pem().into_bytes());
        renewed.push(Renewed {
            name: leaf_name.to_string(),
            not_after: jiff::Timestamp::from_second(params.not_after.unix_timestamp())
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default(),
        });
    }
    Ok((out, renewed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(cn: &str) -> (rcgen::CertificateParams, rcgen::KeyPair, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let pem = p.self_signed(&key).expect("ca").pem();
        (p, key, pem)
    }

    /// A Secret as karmada-operator writes it, with leaves issued a year ago that expire
    /// in a day.
    fn secret() -> BTreeMap<String, Vec<u8>> {
        let mut data = BTreeMap::new();
        let mut cas = BTreeMap::new();
        for name in ["ca", "front-proxy-ca", "etcd-ca"] {
            let (p, key, pem) = ca(name);
            data.insert(format!("{name}.crt"), pem.into_bytes());
            data.insert(format!("{name}.key"), key.serialize_pem().into_bytes());
            cas.insert(name, (p, key));
        }
        for (leaf, ca_name) in LEAVES {
            let (p, k) = &cas[ca_name];
            let issuer = rcgen::Issuer::from_params(p, k);
            let key = rcgen::KeyPair::generate().expect("key");
            let mut lp = rcgen::CertificateParams::new(vec![
                "localhost".to_string(),
                "127.0.0.1".to_string(),
            ])
            .expect("params");
            lp.distinguished_name.push(rcgen::DnType::CommonName, *leaf);
            lp.distinguished_name
                .push(rcgen::DnType::OrganizationName, "system:masters");
            lp.extended_key_usages = vec![
                rcgen::ExtendedKeyUsagePurpose::ServerAuth,
                rcgen::ExtendedKeyUsagePurpose::ClientAuth,
            ];
            lp.key_usages = vec![
                rcgen::KeyUsagePurpose::DigitalSignature,
                rcgen::KeyUsagePurpose::KeyEncipherment,
            ];
            lp.not_before = rcgen::date_time_ymd(2025, 11, 26);
            lp.not_after = rcgen::date_time_ymd(2026, 11, 26);
            let cert = lp.signed_by(&key, &issuer).expect("leaf");
            data.insert(format!("{leaf}.crt"), cert.pem().into_bytes());
            data.insert(format!("{leaf}.key"), key.serialize_pem().into_bytes());
        }
        data
    }

    fn der(data: &BTreeMap<String, Vec<u8>>, key: &str) -> Vec<u8> {
        pem_der(key, &data[key]).expect("pem")
    }

    #[test]
    fn leaves_are_resigned_by_their_ca_with_the_same_key_subject_and_names() {
        let before = secret();
        let now = x509_parser::time::ASN1Time::from_timestamp(1_795_651_200).expect("time"); // 2026-11-26
        let (after, renewed) = renew(&before, now).expect("renewed");
        assert_eq!(renewed.len(), LEAVES.len());
        for (leaf, ca_name) in LEAVES {
            let (old_der, new_der, ca_der) = (
                der(&before, &format!("{leaf}.crt")),
                der(&after, &format!("{leaf}.crt")),
                der(&after, &format!("{ca_name}.crt")),
            );
            let (old, new, ca) = (
                parsed(leaf, &old_der).expect("old"),
                parsed(leaf, &new_der).expect("new"),
                parsed(ca_name, &ca_der).expect("ca"),
            );
            assert_eq!(
                old.public_key().raw,
                new.public_key().raw,
                "{leaf}: same key"
            );
            assert_eq!(old.subject().to_string(), new.subject().to_string());
            assert_eq!(
                new.issuer().as_raw(),
                ca.subject().as_raw(),
                "{leaf}: issuer bytes"
            );
            assert_eq!(
                format!(
                    "{:?}",
                    old.subject_alternative_name()
                        .expect("san")
                        .map(|s| s.value.clone())
                ),
                format!(
                    "{:?}",
                    new.subject_alternative_name()
                        .expect("san")
                        .map(|s| s.value.clone())
                )
            );
            let eku = new.extended_key_usage().expect("eku").expect("eku").value;
            assert!(eku.server_auth && eku.client_auth, "{leaf}");
            assert_eq!(new.validity().not_before, now, "{leaf}");
            // A year, as before.
            let lifetime = new.validity().not_after.timestamp() - now.timestamp();
            assert_eq!(lifetime, 365 * 86_400, "{leaf}");
            new.verify_signature(Some(ca.public_key()))
                .unwrap_or_else(|e| panic!("{leaf} not signed by {ca_name}: {e}"));
            // The keys and CAs are untouched.
            assert_eq!(
                before[&format!("{leaf}.key")],
                after[&format!("{leaf}.key")]
            );
            assert_eq!(
                before[&format!("{ca_name}.crt")],
                after[&format!("{ca_name}.crt")]
            );
        }
    }

    /// karmada-operator's keys are RSA in PKCS #1: a CA with one signs the renewed leaf.
    #[test]
    fn an_rsa_pkcs1_ca_key_signs() {
        let pem = include_bytes!("testdata/rsa-pkcs1.key");
        let key = signing_key("ca.key", pem).expect("PKCS #1 read");
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "karmada");
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = p.self_signed(&key).expect("ca").pem();
        let mut data = secret();
        for ca in ["ca", "front-proxy-ca", "etcd-ca"] {
            data.insert(format!("{ca}.crt"), ca_pem.clone().into_bytes());
            data.insert(format!("{ca}.key"), pem.to_vec());
        }
        // An RSA leaf too (its public key carried over).
        let mut lp =
            rcgen::CertificateParams::new(vec!["karmada-apiserver".to_string()]).expect("params");
        lp.distinguished_name
            .push(rcgen::DnType::CommonName, "karmada-apiserver");
        let issuer = rcgen::Issuer::from_params(&p, &key);
        let leaf = lp.signed_by(&key, &issuer).expect("rsa leaf");
        data.insert("apiserver.crt".into(), leaf.pem().into_bytes());
        let (after, _) = renew(&data, x509_parser::time::ASN1Time::now()).expect("renewed");
        let (leaf, ca) = (der(&after, "apiserver.crt"), der(&after, "ca.crt"));
        let (leaf, ca) = (
            parsed("apiserver", &leaf).expect("leaf"),
            parsed("ca", &ca).expect("ca"),
        );
        leaf.verify_signature(Some(ca.public_key()))
            .expect("signed by the RSA CA");
        assert!(signing_key(
            "x",
            b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"
        )
        .is_err());
    }

    #[test]
    fn a_missing_leaf_is_named_and_nothing_is_renewed() {
        let mut data = secret();
        data.remove("etcd-client.crt");
        let now = x509_parser::time::ASN1Time::now();
        let err = renew(&data, now).expect_err("missing");
        assert!(err.to_string().contains("\"etcd-client.crt\""), "{err}");
        assert_eq!(secret_name("team-a"), "team-a-karmada-cert");
        assert_eq!(secret_name("karmada-demo"), "karmada-demo-cert");
    }
}
