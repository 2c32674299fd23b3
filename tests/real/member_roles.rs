//! Kairship's roles on the member clusters of a real instance: its bindings propagated to
//! every member (one joined later too), so karmadactl's member view and Karmada's cluster
//! proxy answer each role what it may do there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kairship_realfleet::dex::Dex;
use kairship_test_support::{holds, poll, PROCESS_POLL};

use crate::identity::{proxy_kubeconfig, CLIENT};
use crate::Demo;

/// The member clusters of `instance` as their admins see them (bypassing Karmada).
fn member_kubeconfig(demo: &Demo, instance: &str, member: &str) -> PathBuf {
    demo.dir
        .path()
        .join(format!("real/{instance}-{member}/admin.kubeconfig"))
}

/// Runs karmadactl (built by scripts/real-fleet/build.sh).
fn karmadactl(demo: &Demo, kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(kairship_realfleet::default_bin_dir().join("karmadactl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(demo.dir.path())
        .output()
        .expect("karmadactl runs")
}

/// A kubeconfig for `member` through Karmada's cluster proxy, through Kairship's proxy.
fn member_through_kairship(
    demo: &Demo,
    instance: &str,
    member: &str,
    token: &str,
    tag: &str,
) -> PathBuf {
    let ca = std::fs::read_to_string(demo.endpoints["ca"].as_str().expect("ca")).expect("ca");
    let server = format!(
        "{}/apis/kairship.io/v1alpha1/instances/{instance}/proxy/apis/cluster.karmada.io/v1alpha1/clusters/{member}/proxy",
        demo.endpoints["http"].as_str().expect("http")
    );
    let path = demo
        .dir
        .path()
        .join(format!("{tag}-{instance}-{member}.kubeconfig"));
    kairship_wire::kubeconfig::write(
        &path,
        &kairship_wire::kubeconfig::build(member, &server, &ca, token),
    )
    .expect("write kubeconfig");
    path
}

async fn eventually_ok(demo: &Demo, what: &str, kubeconfig: &Path, args: &[&str]) {
    let tried = poll(Duration::from_secs(90), PROCESS_POLL, || {
        let out = demo.kubectl(kubeconfig, args);
        async move { out.status.success().then_some(()).ok_or(out) }
    })
    .await;
    if let Err(out) = tried {
        let karmada = demo.direct("karmada-1");
        let state = demo.kubectl(
            &karmada,
            &[
                "get",
                "clusterpropagationpolicies,clusterresourcebindings,works",
                "-A",
            ],
        );
        let own = std::fs::read_to_string(demo.dir.path().join("demo.log")).unwrap_or_default();
        let own: Vec<&str> = own
            .lines()
            .filter(|l| l.contains("member") || l.contains("spec changed"))
            .collect();
        eprintln!(
            "the demo on members:\n{}",
            own[own.len().saturating_sub(20)..].join("\n")
        );
        let kcm = std::fs::read_to_string(
            demo.dir
                .path()
                .join("real/karmada-1/karmada-controller-manager.log"),
        )
        .unwrap_or_default();
        let about: Vec<&str> = kcm.lines().filter(|l| l.contains("kairship")).collect();
        panic!(
            "{what}: {}\nkarmada-1 has:\n{}{}\nkarmada-controller-manager on kairship:\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&state.stdout),
            String::from_utf8_lossy(&state.stderr),
            about[about.len().saturating_sub(30)..].join("\n")
        );
    }
}

/// Kairship's roles reach the members: the instance's bindings of Kairship's groups are
/// propagated to every member (one joined later too), so karmadactl's member view and
/// Karmada's cluster proxy answer each role what it may do there.
pub async fn roles_on_members(demo: &Demo, dex: &Dex) {
    for m in ["member1", "member2"] {
        eventually_ok(
            demo,
            "kairship:view on the member",
            &member_kubeconfig(demo, "karmada-1", m),
            &["get", "clusterrolebinding", "kairship:view"],
        )
        .await;
    }
    // As admin and as viewer (view on karmada-1): karmadactl's view of the members.
    let admin = demo.kubeconfig("karmada-1");
    let viewer = proxy_kubeconfig(demo, "karmada-1", &demo.token("viewer"), "viewer");
    for (who, kc) in [("admin", &admin), ("viewer", &viewer)] {
        let out = karmadactl(
            demo,
            kc,
            &["get", "deploy", "-A", "--operation-scope", "members"],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{who}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for m in ["member1", "member2"] {
            assert!(
                text.lines().any(|l| l.contains("nginx") && l.contains(m)),
                "{who}: nginx on {m} missing:\n{text}"
            );
        }
    }
    // The cluster proxy: the viewer reads pods, and is refused writes by the member.
    let viewer_m1 = member_through_kairship(
        demo,
        "karmada-1",
        "member1",
        &demo.token("viewer"),
        "viewer",
    );
    demo.ok(&viewer_m1, &["get", "pods", "-n", "default"]);
    let out = demo.kubectl(
        &viewer_m1,
        &["create", "configmap", "from-a-viewer", "-n", "default"],
    );
    // Refused before it leaves Kairship: a write on a member needs Kairship's edit role,
    // as the same write on the instance does.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("needs role \"edit\""),
        "{err}"
    );
    // An editor (alice, edit on karmada-2) writes there; the admin too.
    let alice = dex
        .password_token(CLIENT, &dex.users[1])
        .await
        .expect("alice's token");
    let editor_m1 = member_through_kairship(demo, "karmada-2", "member1", &alice, "editor");
    demo.ok(
        &editor_m1,
        &["create", "configmap", "from-an-editor", "-n", "default"],
    );
    let out = demo.kubectl(&editor_m1, &["create", "namespace", "from-an-editor"]);
    assert!(
        !out.status.success(),
        "an editor created a namespace on a member"
    );
    let out = karmadactl(
        demo,
        &proxy_kubeconfig(demo, "karmada-2", &alice, "alice"),
        &["get", "deploy", "-A", "--operation-scope", "members"],
    );
    assert!(
        out.status.success(),
        "editor: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A member joined later gets the same bindings.
    let bin = kairship_realfleet::default_bin_dir();
    let late_dir = demo.dir.path().join("late");
    std::fs::create_dir_all(&late_dir).expect("dir");
    let (_etcd, etcd_url) = kairship_realfleet::fleet::start_etcd(&bin, &late_dir).expect("etcd");
    let mut late = kairship_realfleet::apiserver::ApiServer::start(
        &bin,
        &late_dir,
        "karmada-1-member3",
        &etcd_url,
        Default::default(),
    )
    .expect("member3 starts");
    let member3 = late
        .wait_ready(Duration::from_secs(120))
        .await
        .expect("member3 ready");
    let _aggregation = kairship_realfleet::karmada::kube_controller_manager(&bin, &late)
        .expect("member3's controllers");
    kairship_realfleet::members::create_nodes(&member3, 1)
        .await
        .expect("nodes");
    // Joined through Kairship (over REST, as karmada-1's admin).
    crate::clusters::join_over_rest(demo, &alice, &late).await;
    eventually_ok(
        demo,
        "kairship:edit on the member joined later",
        &late.kubeconfig,
        &["get", "clusterrolebinding", "kairship:edit"],
    )
    .await;
    crate::clusters::workload_then_remove(demo, &late).await;
    // Removed when asked: the Instance says so, and the members lose the bindings.
    let host = demo.dir.path().join("real/host/admin.kubeconfig");
    demo.ok(
        &host,
        &[
            "annotate",
            "instance",
            "karmada-1",
            "kairship.io/member-access=disabled",
        ],
    );
    let member = member_kubeconfig(demo, "karmada-1", "member1");
    let removed = holds(Duration::from_secs(90), PROCESS_POLL, || {
        !demo
            .kubectl(&member, &["get", "clusterrolebinding", "kairship:view"])
            .status
            .success()
    })
    .await;
    assert!(
        removed,
        "the members kept Kairship's bindings after it was disabled"
    );
    demo.ok(
        &host,
        &[
            "annotate",
            "instance",
            "karmada-1",
            "kairship.io/member-access-",
        ],
    );
    eventually_ok(
        demo,
        "kairship:view back on the member",
        &member_kubeconfig(demo, "karmada-1", "member1"),
        &["get", "clusterrolebinding", "kairship:view"],
    )
    .await;
    println!("roles on members: karmadactl --operation-scope members and the cluster proxy answer admin, editor and viewer as their roles allow; a member joined later got the bindings; disabling removed them");
}
