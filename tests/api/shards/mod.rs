//! Two sharded replicas over one fleet: whichever replica a request reaches, every surface
//! answers for every instance, the replica asked deciding first and the owner deciding
//! again and auditing as the caller; a watch streams through; and when a replica leaves, the other
//! answers for its instances.

use std::path::PathBuf;
use std::time::Duration;

use kairship::actors::tree::Tree;
use kairship::api::context::ApiContext;
use kairship::api::forward::{ForwardConfig, Forwarder};
use kairship::auth::{Auth, AuthConfig};
use kairship::context::Settings;
use kairship::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
use kairship::host::leader::replica_of;
use kairship::host::leader::LeaderConfig;
use kairship::host::shards::handoff::OWNER_ANNOTATION;
use kairship::host::shards::ShardConfig;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::search_service_client::SearchServiceClient;
use kairship::proto::supervisor_service_client::SupervisorServiceClient;
use kairship::proto::{GetInstanceRequest, ListActorsRequest, SearchRequest};
use kube::api::{Api, PostParams};

use crate::common::eventually;
use crate::harness::{fast_settings, Env, NS};
use crate::server::{serve, Served};

mod forged;
mod handoff;
mod rest_writes;
mod run_defaults;

const INSTANCES: usize = 3;
const ADMIN: &str = "shard-admin-token";
const VIEWER: &str = "shard-viewer-token";

/// Sends a bearer token with every gRPC call.
#[derive(Clone)]
struct Bearer(&'static str);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let v = format!("Bearer {}", self.0)
            .parse()
            .map_err(|_| tonic::Status::internal("token"))?;
        req.metadata_mut().insert("authorization", v);
        Ok(req)
    }
}

type Authed = InstanceServiceClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>,
>;

struct Replica {
    name: &'static str,
    tree: Tree,
    served: Served,
    audit: PathBuf,
}

async fn replica(
    env: &Env,
    name: &'static str,
    cert: &kairship_wire::tls::ServingCert,
    auth: &AuthConfig,
) -> Replica {
    let https = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("https://{}", https.local_addr().expect("addr"));
    let identity = format!("{name}_1");
    let lease = (
        Duration::from_secs(3),
        Duration::from_secs(2),
        Duration::from_millis(300),
    );
    let settings = Settings {
        shards: Some(ShardConfig {
            lease_duration: lease.0,
            renew_deadline: lease.1,
            retry_period: lease.2,
            address: Some(address),
            ..ShardConfig::new(NS, name, &identity)
        }),
        ..fast_settings()
    };
    let leader = LeaderConfig {
        lease_duration: lease.0,
        renew_deadline: lease.1,
        retry_period: lease.2,
        ..LeaderConfig::new(NS, "kairship-controller-manager", &identity)
    };
    let tree = Tree::start(env.host.clone(), Some(leader), name, settings)
        .await
        .expect("tree starts");
    let auth = Auth::new(auth, env.host.clone()).await.expect("auth loads");
    let forwarder = Forwarder::new(ForwardConfig {
        ca_pem: cert.ca_pem.clone(),
        server_name: "localhost".into(),
        head_timeout: Duration::from_secs(5),
        handoff_wait: Duration::from_secs(5),
    })
    .expect("forwarder");
    let ctx = ApiContext::with_auth(tree.handle(), auth).with_forwarder(forwarder);
    let audit = env.sim.dir.path().join(format!("audit-{name}.log"));
    let served = serve(ctx, cert, &audit, None, Some(https)).await;
    Replica {
        name,
        tree,
        served,
        audit,
    }
}

impl Replica {
    fn grpc(&self, token: &'static str) -> Authed {
        InstanceServiceClient::with_interceptor(self.served.channel.clone(), Bearer(token))
    }

    async fn https(&self, env: &Env, ca: &str, token: &str) -> kube::Client {
        let kc = kairship_wire::kubeconfig::build("rest", &self.served.https, ca, token);
        let path = env
            .sim
            .dir
            .path()
            .join(format!("{}-{token}.kubeconfig", self.name));
        kairship_wire::kubeconfig::write(&path, &kc).expect("write");
        crate::common::client_from(&path).await
    }

    fn audit_events(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("an audit event is JSON"))
            .collect()
    }

    /// As `kairship run` stops on SIGTERM: the instances are handed over while this
    /// replica still serves, then the listeners close, then the tree stops.
    async fn stop(mut self) {
        self.tree.hand_over(Duration::from_secs(15)).await;
        self.served.serving.stop().await;
        self.tree.shutdown().await;
    }
}

async fn owner(env: &Env, instance: &str) -> Option<String> {
    env.instances()
        .get(instance)
        .await
        .ok()?
        .metadata
        .annotations?
        .get(OWNER_ANNOTATION)
        .cloned()
        .filter(|o| !o.is_empty())
}

async fn get(client: &kube::Client, path: &str) -> (u16, String) {
    kairship_test_support::http::send(client, "GET", path, None).await
}

fn proxied(instance: &str, path: &str) -> String {
    format!("/apis/kairship.io/v1alpha1/instances/{instance}/proxy{path}")
}

/// Two replicas serving one fleet of `INSTANCES`, an admin (`ADMIN`, group ops) on every
/// instance and a viewer (`VIEWER`, vera) of karmada-1; each replica owns some.
struct Pair {
    a: Replica,
    b: Replica,
    cert: kairship_wire::tls::ServingCert,
    auth: AuthConfig,
    names: Vec<String>,
    /// Each of `names`' owner.
    owners: Vec<String>,
    _dir: tempfile::TempDir,
}

async fn pair(env: &Env) -> Pair {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN},root,0,\"ops\"\n{VIEWER},vera,1,\n"),
    )
    .expect("tokens");
    let auth = AuthConfig {
        token_file: Some(tokens),
        ..Default::default()
    };
    let bindings: Api<InstanceRoleBinding> = Api::all(env.host.clone());
    for (name, role, instances, kind, subject) in [
        ("ops", Role::Admin, "*", SubjectKind::Group, "ops"),
        ("vera", Role::View, "karmada-1", SubjectKind::User, "vera"),
    ] {
        let spec = InstanceRoleBindingSpec {
            role,
            instances: vec![instances.into()],
            subjects: vec![Subject {
                kind,
                name: subject.into(),
            }],
        };
        bindings
            .create(
                &PostParams::default(),
                &InstanceRoleBinding::new(name, spec),
            )
            .await
            .expect("binding");
    }
    // Both replicas serve with one certificate, as the chart's pods do.
    let cert = kairship_wire::tls::generate("kairship").expect("cert");
    let a = replica(env, "replica-a", &cert, &auth).await;
    let b = replica(env, "replica-b", &cert, &auth).await;
    env.attach_all(INSTANCES).await;
    let names: Vec<String> = (1..=INSTANCES).map(|i| format!("karmada-{i}")).collect();
    let owners = eventually(Duration::from_secs(20), "every instance owned", || async {
        let mut owners = Vec::new();
        for n in &names {
            owners.push(owner(env, n).await?);
        }
        Some(owners)
    })
    .await;
    assert!(
        owners.iter().any(|o| o == "replica-a") && owners.iter().any(|o| o == "replica-b"),
        "both replicas own some: {owners:?}"
    );
    Pair {
        a,
        b,
        cert,
        auth,
        names,
        owners,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_replica_answers_for_every_instance_as_the_caller() {
    let env = Env::start(INSTANCES).await;
    let Pair {
        a,
        b,
        cert,
        auth,
        names,
        owners,
        _dir,
    } = pair(&env).await;

    // Every instance through either replica: gRPC and the proxy, as the admin.
    for r in [&a, &b] {
        let https = r.https(&env, &cert.ca_pem, ADMIN).await;
        let mut grpc = r.grpc(ADMIN);
        for (n, o) in names.iter().zip(&owners) {
            let got = eventually(
                Duration::from_secs(10),
                &format!("{n} through {}", r.name),
                || {
                    let mut grpc = grpc.clone();
                    async move {
                        grpc.get_instance(GetInstanceRequest { name: n.clone() })
                            .await
                            .ok()
                            .map(|i| i.into_inner())
                    }
                },
            )
            .await;
            assert_eq!(got.metadata.map(|m| m.name).as_deref(), Some(n.as_str()));
            let (code, body) = get(&https, &proxied(n, "/api/v1/namespaces")).await;
            assert_eq!(code, 200, "{n} (owned by {o}) through {}: {body}", r.name);
            assert!(body.contains("\"NamespaceList\""), "{body}");
        }
        drop(
            grpc.get_instance(GetInstanceRequest {
                name: "absent".into(),
            })
            .await,
        );
    }

    // Every replica decides as the caller before forwarding: a viewer of karmada-1 is
    // refused another instance wherever it asks, learns nothing of where it runs, and the
    // refusal is audited once, by the replica it asked.
    let other = names
        .iter()
        .zip(&owners)
        .find(|(n, _)| n.as_str() != "karmada-1")
        .map(|(n, o)| (n.clone(), o.clone()))
        .expect("another instance");
    let (edge, owner_replica) = if other.1 == "replica-a" {
        (&b, &a)
    } else {
        (&a, &b)
    };
    let refused = edge
        .grpc(VIEWER)
        .get_instance(GetInstanceRequest {
            name: other.0.clone(),
        })
        .await
        .expect_err("a viewer of karmada-1 only");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        !refused.message().contains("replica"),
        "a refusal names no replica: {refused:?}"
    );
    let refusals = |r: &Replica| {
        r.audit_events()
            .into_iter()
            .filter(|e| {
                e["user"]["username"] == "vera"
                    && e["annotations"]["kairship.io/instance"] == other.0.as_str()
                    && e["responseStatus"]["code"] == 403
            })
            .count()
    };
    eventually(
        Duration::from_secs(5),
        "the asked replica's audit event",
        || async { (refusals(edge) == 1).then_some(()) },
    )
    .await;
    assert_eq!(
        refusals(owner_replica),
        0,
        "a refused request never reaches the owner"
    );
    let viewer = edge.https(&env, &cert.ca_pem, VIEWER).await;
    let (code, _) = get(&viewer, &proxied("karmada-1", "/api/v1/namespaces")).await;
    assert_eq!(code, 200, "vera views karmada-1 through either replica");

    // A kubeconfig is answered by the replica asked, not the owner: it names the address
    // the caller reached, and kubectl reaches the instance through it.
    let admin = edge.https(&env, &cert.ca_pem, ADMIN).await;
    let path = format!(
        "/apis/kairship.io/v1alpha1/instances/{}/kubeconfig?includeToken=true&form=path",
        other.0
    );
    let (code, body) = get(&admin, &path).await;
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let server = answer["server"].as_str().unwrap_or_default();
    assert!(
        server.starts_with(&format!("{}/apis/", edge.served.https)),
        "the asked replica's address, not the owner's: {server}"
    );
    let file = env.sim.dir.path().join("edge.kubeconfig");
    std::fs::write(&file, answer["kubeconfig"].as_str().unwrap_or_default()).expect("write");
    let out = std::process::Command::new(crate::common::kubectl_bin())
        .arg("--kubeconfig")
        .arg(&file)
        .args(["get", "namespaces", "-o", "name"])
        .output()
        .expect("kubectl runs");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("namespace/default"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A watch streams through the replica that does not own the instance.
    let watched = &other.0;
    let https = edge.https(&env, &cert.ca_pem, ADMIN).await;
    let req = http::Request::get(proxied(watched, "/api/v1/namespaces?watch=1"))
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = https.send(req).await.expect("watch opens");
    assert_eq!(resp.status(), 200);
    let instance = env.sim.client(watched).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(instance);
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some("through-a-peer".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let mut body = resp.into_body();
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        let mut text = String::new();
        while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
            if let Ok(data) = frame.expect("frame").into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
                if text.contains("through-a-peer") {
                    return true;
                }
            }
        }
        false
    })
    .await;
    assert_eq!(
        seen,
        Ok(true),
        "the new namespace arrives on the forwarded watch"
    );
    drop(body);

    // Fleet search through either replica gathers every instance's hits from their owners,
    // page by page.
    for r in [&a, &b] {
        let mut search =
            SearchServiceClient::with_interceptor(r.served.channel.clone(), Bearer(ADMIN));
        let (mut seen, mut token) = (Vec::new(), String::new());
        loop {
            let page = search
                .search(SearchRequest {
                    kinds: vec!["Namespace".into()],
                    name: "default".into(),
                    page_size: 1,
                    page_token: token.clone(),
                    ..Default::default()
                })
                .await
                .expect("search")
                .into_inner();
            assert!(
                page.unavailable_instances.is_empty(),
                "{:?}",
                page.unavailable_instances
            );
            seen.extend(page.hits.into_iter().map(|h| h.instance));
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        assert_eq!(
            seen, names,
            "one `default` namespace per instance through {}",
            r.name
        );
        let found = search
            .search(SearchRequest {
                kinds: vec!["Namespace".into()],
                name: "through-a-peer".into(),
                ..Default::default()
            })
            .await
            .expect("search")
            .into_inner();
        let instances: Vec<&str> = found.hits.iter().map(|h| h.instance.as_str()).collect();
        assert_eq!(instances, [watched.as_str()], "through {}", r.name);
    }
    // The viewer's search through either replica sees only karmada-1.
    let mut search =
        SearchServiceClient::with_interceptor(edge.served.channel.clone(), Bearer(VIEWER));
    let seen = search
        .search(SearchRequest {
            kinds: vec!["Namespace".into()],
            name: "default".into(),
            ..Default::default()
        })
        .await
        .expect("search")
        .into_inner();
    let instances: Vec<&str> = seen.hits.iter().map(|h| h.instance.as_str()).collect();
    assert_eq!(instances, ["karmada-1"]);

    // The actor tree through either replica: each instance's actor once, Running on its
    // owner; both replicas' managers.
    for r in [&a, &b] {
        let mut sup =
            SupervisorServiceClient::with_interceptor(r.served.channel.clone(), Bearer(ADMIN));
        let actors = sup
            .list_actors(ListActorsRequest {})
            .await
            .expect("actors")
            .into_inner()
            .actors;
        for (n, o) in names.iter().zip(&owners) {
            let rows: Vec<_> = actors.iter().filter(|x| &x.instance == n).collect();
            assert_eq!(rows.len(), 1, "{n} through {}: {rows:?}", r.name);
            assert_eq!(rows[0].state, "Running");
            assert_eq!(replica_of(&rows[0].replica), o.as_str(), "{n}");
        }
        let managers: Vec<&str> = actors
            .iter()
            .filter(|x| x.name == "instance-manager")
            .map(|x| replica_of(&x.replica))
            .collect();
        assert_eq!(managers.len(), 2, "{managers:?}");
    }

    // The owner leaves as a SIGTERM stops it, then a third replica joins and dies, under
    // readers: no read fails; the one that stays answers for everything, Running.
    let (stays, leaves) = if owner_replica.name == "replica-a" {
        (b, a)
    } else {
        (a, b)
    };
    let stays = handoff::leave_then_die(&env, (&cert, &auth), stays, leaves, &names).await;
    let mut grpc = stays.grpc(ADMIN);
    for n in &names {
        let got = grpc
            .get_instance(GetInstanceRequest { name: n.clone() })
            .await
            .expect("answered by the replica that stayed");
        assert_eq!(
            got.into_inner().status.map(|s| s.phase),
            Some("Running".to_string())
        );
    }
    forged::a_forged_peer_gets_no_credentials(&env, &stays).await;
    forged::a_forged_http_peer_is_never_dialled(&env, &stays).await;
    stays.stop().await;
}
