//! Attacks on Kairship, made as an attacker would make them: through real clients (the
//! generated gRPC client over a socket, REST and the proxy over HTTPS with kube's client,
//! raw TCP and TLS for the transport) against a real `kairship demo` (the binary, the
//! simulated fleet, OIDC tokens from an IdP the test plays, whose claims it chooses).
//! Each step names the finding of the security review it tries (issue 38); every one of
//! them succeeded against Kairship before its fix. At the end nothing any attack tried to
//! leak is in the demo's output, the Instances' statuses or the audit log.

mod audit;
mod denial;
mod deputy;
mod identity;
mod karmada;
mod sessions;
mod transport;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use kairship::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
use kairship_test_support::process::{self, StopOnDrop};
use kube::api::{Api, PostParams};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

pub const ISSUER: &str = "https://idp.attack.test";
pub const AUDIENCE: &str = "kairship";
/// What the attacks try to leak; it must appear nowhere at the end.
pub const SECRET_VALUE: &str = "TOP-SECRET-4f1c9e-never-show-me";

/// The demo under attack, and what the attacker and its victims hold.
pub struct Demo {
    pub dir: tempfile::TempDir,
    pub endpoints: Value,
    /// The host cluster as its own administrator (the operator of Kairship).
    pub host: kube::Client,
    /// Where the demo's standard output and error go.
    pub output: PathBuf,
    signer: Signer,
    _child: StopOnDrop,
}

struct Signer {
    pkcs8: Vec<u8>,
    jwk: Value,
}

fn signer() -> Signer {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("pair");
    let point = pair.public_key().as_ref();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    Signer {
        pkcs8: pkcs8.as_ref().to_vec(),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": "idp", "alg": "ES256", "use": "sig",
            "x": b64.encode(&point[1..33]), "y": b64.encode(&point[33..65])}),
    }
}

impl Demo {
    /// `kairship demo` with 2 instances, OIDC from the test's IdP (usernames unprefixed,
    /// so the IdP's names are the names), and small per-caller bounds.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let signer = signer();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, json!({"keys": [signer.jwk]}).to_string()).expect("jwks");
        let output = dir.path().join("demo.log");
        let log = std::fs::File::create(&output).expect("log");
        let state = dir.path().join("state");
        let child = Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args([
                "demo",
                "--instances",
                "2",
                "--clusters",
                "2",
                "--grpc-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
                "--probes-addr",
                "127.0.0.1:0",
                "--oidc-issuer-url",
                ISSUER,
                "--oidc-client-id",
                AUDIENCE,
                "--oidc-username-prefix",
                "-",
                "--max-long-running-per-caller",
                "8",
                "--no-member-loopback",
                "--max-requests-per-caller",
                "32",
                "--oidc-jwks-file",
            ])
            .arg(&jwks)
            .arg("--state-dir")
            .arg(&state)
            .env("KAIRSHIP_LOG", "info")
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("kairship demo starts");
        let mut child = StopOnDrop(child);
        let endpoints = process::endpoints(
            &mut child.0,
            &state.join("endpoints.json"),
            Duration::from_secs(90),
        )
        .await
        .unwrap_or_else(|e| panic!("kairship demo: {e}"));
        let host = kairship_test_support::fleet::client_from(Path::new(
            endpoints["host_kubeconfig"]
                .as_str()
                .expect("host kubeconfig"),
        ))
        .await;
        let demo = Self {
            dir,
            endpoints,
            host,
            output,
            signer,
            _child: child,
        };
        // The attacker and a victim: mallory administers karmada-2 (and names she may
        // create), vera views karmada-1.
        demo.bind(
            "mallory-admin",
            Role::Admin,
            &["karmada-2", "stolen", "snoop", "victim", "borrowed"],
            "mallory",
        )
        .await;
        demo.bind("vera-view", Role::View, &["karmada-1"], "vera")
            .await;
        demo
    }

    /// Binds `role` on `instances` to the IdP group `group`.
    pub async fn bind_group(&self, name: &str, role: Role, instances: &[&str], group: &str) {
        let api: Api<InstanceRoleBinding> = Api::all(self.host.clone());
        let spec = InstanceRoleBindingSpec {
            role,
            instances: instances.iter().map(|s| s.to_string()).collect(),
            subjects: vec![Subject {
                kind: SubjectKind::Group,
                name: group.into(),
            }],
        };
        api.create(
            &PostParams::default(),
            &InstanceRoleBinding::new(name, spec),
        )
        .await
        .expect("binding");
    }

    async fn bind(&self, name: &str, role: Role, instances: &[&str], user: &str) {
        let api: Api<InstanceRoleBinding> = Api::all(self.host.clone());
        let spec = InstanceRoleBindingSpec {
            role,
            instances: instances.iter().map(|s| s.to_string()).collect(),
            subjects: vec![Subject {
                kind: SubjectKind::User,
                name: user.into(),
            }],
        };
        api.create(
            &PostParams::default(),
            &InstanceRoleBinding::new(name, spec),
        )
        .await
        .expect("binding");
    }

    /// An ID token the test's IdP signs for `sub` with `groups`.
    pub fn token(&self, sub: &str, groups: &[&str]) -> String {
        let now = jiff::Timestamp::now().as_second();
        let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "groups": groups,
            "iat": now, "exp": now + 3600});
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("idp".into());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(&self.signer.pkcs8),
        )
        .expect("sign")
    }

    /// The demo's own admin (admin on every instance, may read kubeconfig Secrets).
    pub fn admin_token(&self) -> String {
        self.endpoints["tokens"]["admin"]
            .as_str()
            .expect("admin token")
            .into()
    }

    pub fn https(&self) -> String {
        self.endpoints["http"].as_str().expect("http").into()
    }

    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.endpoints["ca"].as_str().expect("ca")).expect("ca")
    }

    /// A gRPC channel to the demo's (loopback, plain-text) gRPC port.
    pub async fn grpc(&self) -> tonic::transport::Channel {
        tonic::transport::Channel::from_shared(format!(
            "http://{}",
            self.endpoints["grpc"].as_str().expect("grpc")
        ))
        .expect("address")
        .connect()
        .await
        .expect("gRPC connects")
    }

    /// A Kubernetes client of Kairship's HTTPS address (REST, or the proxy under
    /// `prefix`) sending `token`.
    pub async fn client(&self, prefix: &str, token: &str) -> kube::Client {
        let server = format!("{}{prefix}", self.https());
        let kc = kairship_wire::kubeconfig::build("x", &server, &self.ca_pem(), token);
        let n: u64 = rand_suffix();
        let path = self.dir.path().join(format!("client-{n}.kubeconfig"));
        kairship_wire::kubeconfig::write(&path, &kc).expect("kubeconfig");
        kairship_test_support::fleet::client_from(&path).await
    }

    /// A client of `instance`'s proxy as `token`.
    pub async fn proxy(&self, instance: &str, token: &str) -> kube::Client {
        self.client(
            &format!("/apis/kairship.io/v1alpha1/instances/{instance}/proxy"),
            token,
        )
        .await
    }

    /// The audit events written so far.
    pub fn audit_events(&self) -> Vec<Value> {
        let path = self.endpoints["audit_log"].as_str().expect("audit_log");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("an audit event is JSON"))
            .collect()
    }
}

/// Runs `check` until it is `Ok` (every 200 ms), failing with its last `Err` after
/// `within`.
pub async fn eventually_ok<F, Fut>(within: Duration, what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let tried = kairship_test_support::poll(within, Duration::from_millis(200), check).await;
    if let Err(e) = tried {
        panic!("{what}: {e}");
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// gRPC metadata carrying `token`.
pub fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let v = format!("Bearer {token}").parse().expect("metadata");
    r.metadata_mut().insert("authorization", v);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_on_a_running_demo_fail_and_leave_a_trace() {
    let started = std::time::Instant::now();
    let demo = Demo::start().await;
    println!("demo up after {:?}", started.elapsed());
    deputy::another_instances_kubeconfig_secret(&demo).await;
    deputy::secrets_outside_the_allowed_namespaces(&demo).await;
    deputy::secret_contents_are_never_quoted(&demo).await;
    deputy::someone_elses_karmada_object_is_not_adopted(&demo).await;
    deputy::managed_specs_stay_in_scope(&demo).await;
    identity::an_idps_kairship_and_system_groups_are_dropped(&demo).await;
    identity::system_usernames_are_refused(&demo).await;
    denial::a_body_is_not_read_before_authentication(&demo).await;
    denial::headers_that_never_end_are_cut(&demo).await;
    denial::a_watch_flood_leaves_reads_alone(&demo).await;
    denial::metrics_are_not_for_strangers(&demo).await;
    denial::a_grpc_stream_that_never_ends_is_answered(&demo).await;
    denial::http2_headers_that_never_end_are_cut(&demo).await;
    karmada::a_viewer_reads_no_works(&demo).await;
    karmada::an_editor_gets_no_member_credentials(&demo).await;
    karmada::encoded_paths_are_refused(&demo).await;
    karmada::join_dials_no_internal_address(&demo).await;
    karmada::a_respelt_webhook_signature_is_a_replay(&demo).await;
    karmada::viewers_leave_the_admin_a_stream(&demo).await;
    karmada::refused_strangers_cannot_grow_the_audit_log(&demo).await;
    sessions::exec_and_logs_need_their_roles(&demo).await;
    audit::every_write_and_refusal_left_an_event(&demo).await;
    audit::nothing_leaked(&demo).await;
    println!("attacks done after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_grpc_is_tls() {
    transport::grpc_is_tls_unless_told_otherwise().await;
}
