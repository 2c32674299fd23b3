//! What the handler chain costs per request, side by side in one process. First the chain
//! alone: one trivial handler answered in process (no network), bare and behind the chain
//! (authentication against a 1,000-line token file, an audit record, fairness slots, the
//! rule table and 1,001 role bindings). Then a cached GET over gRPC against two API
//! front-ends over one supervision tree, one with auth disabled and one checking the token.
//! Calls interleave one by one so machine noise hits both alike. Prints figures only.
//! Run: `cargo bench --bench chain_overhead`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kairship::actors::tree::{Election, Tree};
use kairship::api::context::ApiContext;
use kairship::auth::{Auth, AuthConfig};
use kairship::context::Settings;
use kairship::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::GetWorkloadRequest;
use kube::api::{Api, PostParams};
use serde_json::json;
use tonic::transport::Channel;

mod common;
use common::{deployment, BenchFleet};

const USERS: usize = 1_000;
const ROUNDS: usize = 7;
const PER_ROUND: usize = 2_000;

/// The API of `ctx` on loopback (both ports; the gRPC one in plain text), and a channel
/// to its gRPC port; the server runs until the process ends.
async fn serve(ctx: ApiContext) -> Channel {
    let bind = || async {
        tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind")
    };
    let (grpc, https) = (bind().await, bind().await);
    let addr = grpc.local_addr().expect("addr");
    let cert = kairship_wire::tls::generate("kairship").expect("cert");
    let serving = kairship::api::mount::start(
        ctx,
        kairship::api::mount::ApiConfig {
            https,
            grpc,
            tls: cert.server_config,
            grpc_tls: None,
            audit: Arc::new(kairship::api::chain::audit::Sink::Log),
            limits: Default::default(),
            fairness: Default::default(),
            chaos_reports: None,
            instance_hosts: None,
        },
    )
    .await
    .expect("the API starts");
    std::mem::forget(serving);
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

/// One call's latency.
async fn one(c: &mut WorkloadServiceClient<Channel>, token: Option<&str>) -> Duration {
    let t = Instant::now();
    c.get_workload(request(token)).await.expect("get");
    t.elapsed()
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bench = BenchFleet::start(1).await;
    bench.seed_deployments("karmada-1", [deployment("web", json!({"app": "web"}))]);
    // As an operator would: the instance maps Kairship's role groups to its own roles, so
    // the access reviews of cached reads allow a viewer.
    kairship::bootstrap::apply_instance_rbac(&bench.fleet_client("karmada-1").await)
        .await
        .expect("instance RBAC");
    let (dir, host) = (&bench.dir, bench.host.clone());

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
    bench.wait_running(1).await;
    let open = ApiContext::new(tree.handle());
    let guarded = ApiContext::with_auth(tree.handle(), Arc::clone(&auth));
    open.ready().await;
    guarded.ready().await;
    let mut a = WorkloadServiceClient::new(serve(open).await);
    let mut b = WorkloadServiceClient::new(serve(guarded.clone()).await);
    let token = "token-00007";
    // Wait until the group binding is in the index and the workload in the cache.
    let waiting = Instant::now();
    while let Err(e) = b.get_workload(request(Some(token))).await {
        assert!(
            waiting.elapsed() < Duration::from_secs(60),
            "the guarded API never answered: {e:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..PER_ROUND {
        one(&mut a, None).await;
        one(&mut b, Some(token)).await;
    }

    // Three series: auth off without a token, auth off with the same token header sent
    // (isolates the header's cost on the wire), auth on. Calls of the three interleave one
    // by one in rotating order, so drift on a shared machine hits all three alike.
    let mut series: [Vec<Vec<Duration>>; 3] = Default::default();
    for _ in 0..ROUNDS {
        let mut round: [Vec<Duration>; 3] = Default::default();
        for i in 0..PER_ROUND {
            for k in 0..3 {
                let which = (i + k) % 3;
                round[which].push(match which {
                    0 => one(&mut a, None).await,
                    1 => one(&mut a, Some(token)).await,
                    _ => one(&mut b, Some(token)).await,
                });
            }
        }
        for (which, mut v) in round.into_iter().enumerate() {
            v.sort();
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
    println!("auth overhead on a cached gRPC GetWorkload, {USERS} tokens and {} bindings, {ROUNDS} rounds of {PER_ROUND} interleaved calls each (median of rounds):", USERS + 1);
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
    chain_alone(&guarded, token).await;
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
    bench.fleet.shutdown();
}

/// The chain's layers around a handler that only says "ok", in process: p50/p99 bare and
/// behind the chain, interleaved.
async fn chain_alone(ctx: &ApiContext, token: &str) {
    use tower::ServiceExt;
    let path =
        "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces/default/pods";
    let handler = || {
        axum::Router::new().route(
            "/apis/kairship.io/v1alpha1/instances/{name}/proxy/{*rest}",
            axum::routing::get(|| async { "ok" }),
        )
    };
    let chain = kairship::api::chain::Chain::new(
        ctx.clone(),
        Arc::new(kairship::api::chain::audit::Sink::Log),
        Default::default(),
    )
    .expect("chain");
    let (bare, guarded) = (handler(), chain.protect(handler()));
    // As the server does at its edge: the path decoded once and the request's info
    // computed, which every layer then reads.
    let request = || {
        let req = http::Request::get(path)
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::empty())
            .expect("request");
        kairship::api::request_info::at_edge(req, Default::default()).expect("a plain path")
    };
    let call = |app: axum::Router| async move {
        let t = Instant::now();
        let resp = app.oneshot(request()).await.expect("answer");
        assert_eq!(resp.status(), 200);
        t.elapsed()
    };
    for _ in 0..2_000 {
        call(bare.clone()).await;
        call(guarded.clone()).await;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..50_000 {
        a.push(call(bare.clone()).await);
        b.push(call(guarded.clone()).await);
    }
    a.sort();
    b.sort();
    let at = |v: &[Duration], q: usize| v[v.len() * q / 100];
    // The edge alone: decoding the path once and reading the request's info.
    let mut edge = Vec::new();
    for _ in 0..50_000 {
        let req = http::Request::get(format!("{path}?watch=1&resourceVersion=12"))
            .body(())
            .expect("request");
        let t = Instant::now();
        let req =
            kairship::api::request_info::at_edge(req, Default::default()).expect("a plain path");
        edge.push(t.elapsed());
        std::hint::black_box(req);
    }
    edge.sort();
    println!(
        "one decoded request at the edge (a proxied watch's path and query): p50 {:.2?}, p99 {:.2?}",
        at(&edge, 50),
        at(&edge, 99)
    );
    println!("the chain alone, in process (50,000 interleaved requests each):");
    for (what, q) in [("p50", 50), ("p99", 99)] {
        let (x, y) = (at(&a, q), at(&b, q));
        println!(
            "  {what:<4} bare {x:>9.2?}  with the chain {y:>9.2?}  the chain adds {:>9.2?}",
            y.saturating_sub(x)
        );
    }
}
