//! Every instance behind one listener (`kairship sim --shared-listener`): kubectl reaches
//! each by the kubeconfig's tls-server-name, each sees only its own objects, and a name
//! no instance has (or no longer has) gets no answer.

use serde_json::Value;

use crate::common::Sim;

fn cluster_of(sim: &Sim, name: &str) -> Value {
    let text = std::fs::read_to_string(sim.kubeconfig(name)).expect("kubeconfig");
    let kc: Value = serde_json::from_str(&text).expect("kubeconfig parses");
    kc["clusters"][0]["cluster"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_behind_one_listener_are_reached_by_name() {
    let sim = Sim::start_configured(2, 1, |c| c.shared_listener = true).await;
    let (one, two) = (cluster_of(&sim, "karmada-1"), cluster_of(&sim, "karmada-2"));
    assert_eq!(one["server"], two["server"], "one address for both");
    assert_eq!(one["tls-server-name"], "karmada-1");
    assert_eq!(two["tls-server-name"], "karmada-2");

    sim.kubectl(
        "karmada-1",
        &["create", "configmap", "only-here", "-n", "default"],
    );
    let there = sim.kubectl_raw(
        "karmada-2",
        &["get", "configmap", "only-here", "-n", "default"],
    );
    assert!(!there.status.success(), "karmada-2 is a store of its own");
    assert!(String::from_utf8_lossy(&there.stderr).contains("NotFound"));
    sim.kubectl(
        "karmada-1",
        &["get", "configmap", "only-here", "-n", "default"],
    );

    // A name the listener does not serve: no certificate, no answer.
    let text = std::fs::read_to_string(sim.kubeconfig("karmada-2")).expect("kubeconfig");
    let mut kc: Value = serde_json::from_str(&text).expect("kubeconfig parses");
    kc["clusters"][0]["cluster"]["tls-server-name"] = "karmada-9".into();
    std::fs::write(sim.kubeconfig("stranger"), kc.to_string()).expect("write");
    let out = sim.kubectl_raw("stranger", &["get", "--raw", "/version"]);
    assert!(!out.status.success(), "an unknown name must not be served");

    // A removed instance stops answering; its neighbour does not notice.
    sim.fleet.remove_instance("karmada-2");
    let out = sim.kubectl_raw("karmada-2", &["get", "--raw", "/version"]);
    assert!(!out.status.success(), "a removed instance must not answer");
    sim.kubectl("karmada-1", &["get", "--raw", "/version"]);
}
