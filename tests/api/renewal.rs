//! Renewing a managed instance's certificates through the API, on the simulated operator
//! (whose certificate Secret the test writes as karmada-operator lays it out): each leaf
//! re-signed with the same key by the same CA from now, the Secret rewritten, every
//! component but etcd rolled through the Instance's Karmada spec; an External instance
//! and a missing Secret refused, named (a viewer's refusal: tests/security/sessions.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::*;
use kube::api::{Api as KubeApi, DynamicObject, PostParams};
use tonic::Code;

use crate::common::eventually;
use crate::harness::NS;
use crate::server::Api;

/// karmada-operator's certificate Secret of `karmada`: three CAs and five leaves issued
/// `days_ago` (for a year), each with its key.
pub(crate) fn operator_cert_secret(karmada: &str, days_ago: i64) -> Secret {
    let day = |offset: i64| {
        let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * offset);
        let d = t.to_zoned(jiff::tz::TimeZone::UTC).date();
        rcgen::date_time_ymd(i32::from(d.year()), d.month() as u8, d.day() as u8)
    };
    let mut data = BTreeMap::new();
    let mut cas = BTreeMap::new();
    for name in ["ca", "front-proxy-ca", "etcd-ca"] {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).expect("ca");
        data.insert(format!("{name}.crt"), ByteString(cert.pem().into_bytes()));
        data.insert(
            format!("{name}.key"),
            ByteString(key.serialize_pem().into_bytes()),
        );
        cas.insert(name, (p, key));
    }
    for (leaf, ca) in [
        ("apiserver", "ca"),
        ("karmada", "ca"),
        ("front-proxy-client", "front-proxy-ca"),
        ("etcd-server", "etcd-ca"),
        ("etcd-client", "etcd-ca"),
    ] {
        let (cp, ck) = &cas[ca];
        let issuer = rcgen::Issuer::from_params(cp, ck);
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(vec![format!("{karmada}-apiserver.{NS}.svc")])
            .expect("params");
        p.distinguished_name.push(rcgen::DnType::CommonName, leaf);
        p.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.not_before = day(-days_ago);
        p.not_after = day(365 - days_ago);
        let cert = p.signed_by(&key, &issuer).expect("leaf");
        data.insert(format!("{leaf}.crt"), ByteString(cert.pem().into_bytes()));
        data.insert(
            format!("{leaf}.key"),
            ByteString(key.serialize_pem().into_bytes()),
        );
    }
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{karmada}-karmada-cert")),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

fn not_before(pem: &[u8]) -> i64 {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem).expect("pem");
    let c = p.parse_x509().expect("x509");
    c.validity().not_before.timestamp()
}

fn public_key(pem: &[u8]) -> Vec<u8> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem).expect("pem");
    p.parse_x509().expect("x509").public_key().raw.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_renewed_and_components_rolled() {
    let api = Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    c.clone()
        .create_instance(CreateInstanceRequest {
            instance: Some(crate::server::managed_instance("team-r")),
        })
        .await
        .expect("created");
    let renew = |name: &str| {
        let mut c = c.clone();
        let req = RenewCertificatesRequest { name: name.into() };
        async move { c.renew_certificates(req).await }
    };
    let external = renew("karmada-1").await.expect_err("External");
    assert_eq!(external.code(), Code::FailedPrecondition, "{external:?}");
    assert!(
        external.message().contains("External"),
        "{}",
        external.message()
    );
    // Before karmada-operator wrote its Secret: named.
    let missing = eventually(Duration::from_secs(20), "the Karmada object", || async {
        renew("team-r")
            .await
            .err()
            .filter(|e| e.code() == Code::NotFound)
    })
    .await;
    assert!(
        missing.message().contains("team-r-karmada-cert"),
        "{}",
        missing.message()
    );

    let secrets: KubeApi<Secret> = KubeApi::namespaced(api.env.host.clone(), NS);
    let before = secrets
        .create(&PostParams::default(), &operator_cert_secret("team-r", 30))
        .await
        .expect("operator Secret");
    let started = jiff::Timestamp::now().as_second();
    let r = renew("team-r").await.expect("renewed").into_inner();
    let names: Vec<&str> = r.certificates.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "team-r-karmada-cert/apiserver.crt",
            "team-r-karmada-cert/karmada.crt",
            "team-r-karmada-cert/front-proxy-client.crt",
            "team-r-karmada-cert/etcd-server.crt",
            "team-r-karmada-cert/etcd-client.crt",
        ]
    );
    assert!(
        !r.rolled.is_empty() && !r.rolled.iter().any(|c| c == "etcd"),
        "{:?}",
        r.rolled
    );
    let after = secrets.get("team-r-karmada-cert").await.expect("Secret");
    let (old, new) = (before.data.expect("data"), after.data.expect("data"));
    for leaf in [
        "apiserver",
        "karmada",
        "front-proxy-client",
        "etcd-server",
        "etcd-client",
    ] {
        let key = format!("{leaf}.crt");
        assert!(not_before(&new[&key].0) >= started - 5, "{leaf} issued now");
        assert_eq!(
            public_key(&old[&key].0),
            public_key(&new[&key].0),
            "{leaf}: same key"
        );
        assert_eq!(old[&format!("{leaf}.key")], new[&format!("{leaf}.key")]);
    }
    assert_eq!(old["ca.crt"], new["ca.crt"], "the CA kept");
    // The roll: an annotation on each component block, carried to the Karmada object.
    let karmadas: KubeApi<DynamicObject> = KubeApi::namespaced_with(
        api.env.host.clone(),
        NS,
        &kairship::actors::instance::connect::karmada_resource(),
    );
    eventually(
        Duration::from_secs(20),
        "the roll reaches the Karmada object",
        || async {
            let k = karmadas.get("team-r").await.ok()?;
            let components = k.data["spec"]["components"].clone();
            r.rolled
                .iter()
                .all(|c| {
                    components[c]["annotations"]["kairship.io/certificates-renewed-at"].is_string()
                })
                .then_some(())
                .filter(|_| components["etcd"].get("annotations").is_none())
        },
    )
    .await;
}

/// The leader renews by itself once a leaf is within 30 days of expiry (the default),
/// and only then: a Secret issued a month ago is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_near_expiry_are_renewed_by_the_leader() {
    let api = Api::start(0).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let secrets: KubeApi<Secret> = KubeApi::namespaced(api.env.host.clone(), NS);
    for (name, days_ago) in [("team-old", 350), ("team-new", 30)] {
        c.clone()
            .create_instance(CreateInstanceRequest {
                instance: Some(crate::server::managed_instance(name)),
            })
            .await
            .expect("created");
        secrets
            .create(
                &PostParams::default(),
                &operator_cert_secret(name, days_ago),
            )
            .await
            .expect("operator Secret");
    }
    let started = jiff::Timestamp::now().as_second();
    let issued = |name: &'static str| {
        let secrets = secrets.clone();
        async move {
            let s = secrets.get(&format!("{name}-karmada-cert")).await.ok()?;
            Some(not_before(&s.data?.get("apiserver.crt")?.0))
        }
    };
    eventually(
        Duration::from_secs(30),
        "team-old renewed by itself",
        || async { issued("team-old").await.filter(|nb| *nb >= started - 5) },
    )
    .await;
    let new = issued("team-new").await.expect("team-new's Secret");
    assert!(
        new < started - 86_400,
        "a month-old certificate was renewed too"
    );
}
