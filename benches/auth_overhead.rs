//! What authentication plus authorization costs per request, side by side in one process:
//! the same cached GET against two API front-ends over one supervision tree, one with
//! auth disabled and one checking a bearer token (a 1,000-line token file) and 1,000
//! role bindings. Rounds alternate so machine noise hits both alike. Prints figures only.
//! Run: `cargo bench --bench auth_overhead`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kairship::actors::context::Settings;
use kairship::actors::tree::{Election, Tree};
use kairship::api::router::Router;
use kairship::auth::{Auth, AuthConfig};
use kairship::bootstrap;
use kairship::crd::{
    Instance, InstanceRoleBinding, InstanceRoleBindingSpec, Phase, Role, Subject, SubjectKind,
};
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::GetWorkloadRequest;
use kairship_sim::{Fleet, FleetConfig};
use kube::api::{Api, PostParams};
use serde_json::json;
use tonic::transport::Channel;

const USERS: usize = 1_000;
const ROUNDS: usize = 7;
const PER_ROUND: usize = 2_000;

async fn client(path: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config"),
    )
    .expect("client")
}

async fn serve(router: Router) -> Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(kairship::api::grpc::serve(
        listener,
        router,
        std::future::pending(),
    ));
    Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect")
}

fn request(token: Option<&str>) -> tonic::Request<GetWorkloadRequest> {
    let mut r = tonic::Request::new(GetWorkloadRequest {
        instance: "karmada-1".into(),
        kind: "Deployment".into(),
        namespace: "default".into(),
        name: "web".into(),
    });
    if let Some(t) = token {
        let v = format!("Bearer {t}").parse().expect("metadata");
        r.metadata_mut().insert("authorization", v);
    }
    r
}

/// Per-request latencies of one round, sorted.
async fn round(c: &mut WorkloadServiceClient<Channel>, token: Option<&str>) -> Vec<Duration> {
    let mut v = Vec::with_capacity(PER_ROUND);
    for _ in 0..PER_ROUND {
        let t = Instant::now();
        c.get_workload(request(token)).await.expect("get");
        v.push(t.elapsed());
    }
    v.sort();
    v
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = Fleet::start(FleetConfig {
        instances: 1,
        clusters: 2,
        state_dir: Some(dir.path().to_path_buf()),
        cluster_tick: Duration::from_secs(3600),
        ..Default::default()
    })
    .await
    .expect("fleet");
    let inst = fleet.instance("karmada-1").expect("karmada-1");
    let def = inst
        .server
        .store
        .lookup("apps", "v1", "deployments")
        .expect("deployments served");
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}});
    inst.server
        .store
        .create(&def, Some("default"), d)
        .expect("create");
    let host = client(&dir.path().join("kubeconfigs/host.kubeconfig")).await;
    bootstrap::install_crds(&host).await.expect("crds");
    bootstrap::ensure_namespace(&host, "kairship-system")
        .await
        .expect("ns");
    let config = std::fs::read(dir.path().join("kubeconfigs/karmada-1.kubeconfig")).expect("kc");
    bootstrap::attach_external(&host, "kairship-system", "karmada-1", config)
        .await
        .expect("attach");

    // 1,000 users in the token file, each bound on its own instance name; the one we
    // measure is bound through a group, the last binding created.
    let mut tokens = String::new();
    let bindings: Api<InstanceRoleBinding> = Api::all(host.clone());
    for i in 0..USERS {
        tokens.push_str(&format!("token-{i:05},user-{i},{i},\"team-{}\"\n", i % 50));
        let b = InstanceRoleBinding::new(
            &format!("b-{i}"),
            InstanceRoleBindingSpec {
                role: Role::View,
                instances: vec![format!("instance-{i}")],
                subjects: vec![Subject {
                    kind: SubjectKind::User,
                    name: format!("user-{i}"),
                }],
            },
        );
        bindings
            .create(&PostParams::default(), &b)
            .await
            .expect("binding");
    }
    let reader = InstanceRoleBinding::new(
        "team-7-view",
        InstanceRoleBindingSpec {
            role: Role::View,
            instances: vec!["karmada-1".into()],
            subjects: vec![Subject {
                kind: SubjectKind::Group,
                name: "team-7".into(),
            }],
        },
    );
    bindings
        .create(&PostParams::default(), &reader)
        .await
        .expect("binding");
    let token_file = dir.path().join("tokens.csv");
    std::fs::write(&token_file, tokens).expect("tokens");
    let auth = Auth::new(
        &AuthConfig {
            token_file: Some(token_file),
            ..Default::default()
        },
        host.clone(),
    )
    .await
    .expect("auth");

    let tree = Tree::start_with(host.clone(), Election::Always, "bench", Settings::default())
        .await
        .expect("tree");
    let instances: Api<Instance> = Api::all(host.clone());
    while instances
        .get("karmada-1")
        .await
        .ok()
        .and_then(|i| i.status)
        .is_none_or(|s| s.phase != Phase::Running)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let open = Router::new(tree.handle());
    let guarded = Router::with_auth(tree.handle(), Arc::clone(&auth));
    open.ready().await;
    guarded.ready().await;
    let mut a = WorkloadServiceClient::new(serve(open.clone()).await);
    let mut b = WorkloadServiceClient::new(serve(guarded).await);
    let token = "token-00007";
    // Wait until the group binding is in the index and the workload in the cache.
    while b.get_workload(request(Some(token))).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    round(&mut a, None).await;
    round(&mut b, Some(token)).await;

    // Three series: auth off without a token, auth off with the same token header sent
    // (isolates the header's cost on the wire), auth on. The order rotates per round.
    let mut series: [Vec<Vec<Duration>>; 3] = Default::default();
    for r in 0..ROUNDS {
        for k in 0..3 {
            let which = (r + k) % 3;
            let v = match which {
                0 => round(&mut a, None).await,
                1 => round(&mut a, Some(token)).await,
                _ => round(&mut b, Some(token)).await,
            };
            series[which].push(v);
        }
    }
    let median = |rs: &[Vec<Duration>], f: &dyn Fn(&[Duration]) -> Duration| {
        let mut xs: Vec<Duration> = rs.iter().map(|r| f(r)).collect();
        xs.sort();
        xs[xs.len() / 2]
    };
    let p50 = |r: &[Duration]| r[r.len() / 2];
    let p99 = |r: &[Duration]| r[(r.len() * 99) / 100];
    println!("auth overhead on a cached gRPC GetWorkload, {USERS} tokens and {} bindings, {ROUNDS} rotating rounds of {PER_ROUND} (median of rounds):", USERS + 1);
    for (what, f) in [
        ("mean", &mean as &dyn Fn(&[Duration]) -> Duration),
        ("p50", &p50),
        ("p99", &p99),
    ] {
        let [off, off_hdr, on] = [0, 1, 2].map(|i| median(&series[i], f));
        let pct = |x: Duration, y: Duration| (y.as_secs_f64() / x.as_secs_f64() - 1.0) * 100.0;
        println!(
            "  {what:<4} off {off:>9.2?}  off+header {off_hdr:>9.2?}  on {on:>9.2?}   on vs off {:+.1}%   on vs off+header {:+.1}%",
            pct(off, on),
            pct(off_hdr, on)
        );
    }
    // The check itself, without the network: authenticate + authorize in a loop.
    let n = 200_000;
    let header = format!("Bearer {token}");
    let t = Instant::now();
    for _ in 0..n {
        let caller = auth.authenticate(Some(&header)).expect("authenticated");
        auth.authorize(&caller, Role::View, "karmada-1", "get workloads")
            .expect("authorized");
    }
    println!(
        "  authenticate + authorize alone: {:.2?} per request",
        t.elapsed() / n
    );
    tree.shutdown().await;
    fleet.shutdown();
}
