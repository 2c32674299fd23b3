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
fn operator_cert_secret(karmada: &str, days_ago: i64) -> Secret {
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

/// Waits for the simulated operator's certificate Secret of `name`, then replaces it with
/// one whose leaves were issued `days_ago`.
async fn aged(secrets: &KubeApi<Secret>, name: &str, days_ago: i64) -> Secret {
    let secret = format!("{name}-karmada-cert");
    eventually(
        Duration::from_secs(20),
        "the operator's certificate Secret",
        || async { secrets.get(&secret).await.ok() },
    )
    .await;
    secrets
        .delete(&secret, &Default::default())
        .await
        .expect("deleted");
    secrets
        .create(
            &PostParams::default(),
            &operator_cert_secret(name, days_ago),
        )
        .await
        .expect("operator Secret")
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
    // The simulated operator's certificates are listed with the instance's.
    eventually(
        Duration::from_secs(20),
        "the operator's certificates listed",
        || async {
            let i = c
                .clone()
                .get_instance(GetInstanceRequest {
                    name: "team-r".into(),
                })
                .await
                .ok()?
                .into_inner();
            i.status?
                .certificates
                .iter()
                .any(|c| c.name == "team-r-karmada-cert/apiserver.crt")
                .then_some(())
        },
    )
    .await;
    // The simulated operator's Secret, made a month old.
    let secrets: KubeApi<Secret> = KubeApi::namespaced(api.env.host.clone(), NS);
    let before = aged(&secrets, "team-r", 30).await;
    // While karmada-operator runs its workflow (Ready False), refused, naming why: the
    // workflow would write back the certificates it loaded at its start.
    let karmadas: KubeApi<DynamicObject> = KubeApi::namespaced_with(
        api.env.host.clone(),
        NS,
        &kairship::host::karmada::karmada_resource(),
    );
    let ready = |status: &str, reason: &str| {
        serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": status,
            "reason": reason, "message": "karmada init job", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    };
    let params = kube::api::PatchParams::default();
    karmadas
        .patch_status(
            "team-r",
            &params,
            &kube::api::Patch::Merge(&ready("False", "Progressing")),
        )
        .await
        .expect("in progress");
    let busy = renew("team-r").await.expect_err("busy");
    assert_eq!(busy.code(), Code::FailedPrecondition, "{busy:?}");
    assert!(
        busy.message().contains("is applying a change") && busy.message().contains("Progressing"),
        "{}",
        busy.message()
    );
    karmadas
        .patch_status(
            "team-r",
            &params,
            &kube::api::Patch::Merge(&ready("True", "Completed")),
        )
        .await
        .expect("done");
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
    // Without the operator's Secret (once the operator is done with the roll): named.
    eventually(Duration::from_secs(20), "the roll applied", || async {
        let k = karmadas.get("team-r").await.ok()?;
        (k.data["status"]["conditions"][0]["status"] == "True").then_some(())
    })
    .await;
    secrets
        .delete("team-r-karmada-cert", &Default::default())
        .await
        .expect("deleted");
    let missing = renew("team-r").await.expect_err("no Secret");
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    assert!(
        missing.message().contains("team-r-karmada-cert"),
        "{}",
        missing.message()
    );
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
        aged(&secrets, name, days_ago).await;
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
