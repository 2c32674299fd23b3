//! Karmada's job in a simulated instance, seen through kubectl: the upstream nginx sample
//! scheduled, executed and aggregated as real Karmada does it (the same scenario runs
//! against real Karmada in tests/real).

use std::time::Duration;

#[path = "../scenarios/nginx.rs"]
mod nginx;

use crate::common::Sim;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nginx_sample_is_placed_overridden_and_aggregated() {
    let sim = Sim::start_with(1, 3).await;
    let kubectl = |args: &[&str]| {
        // The simulator serves no OpenAPI document, so kubectl cannot validate locally.
        let mut a: Vec<&str> = args.to_vec();
        if a.first() == Some(&"apply") {
            a.push("--validate=false");
        }
        sim.kubectl_raw("karmada-1", &a)
    };
    let samples = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/karmada/samples");
    tokio::task::block_in_place(|| {
        nginx::nginx_sample(&kubectl, Some(samples), Duration::from_secs(30))
    });

    // Removing a cluster from the placement removes its Work.
    let patch = r#"{"spec":{"placement":{"clusterAffinity":{"clusterNames":["member1"]},"replicaScheduling":null}}}"#;
    sim.kubectl(
        "karmada-1",
        &[
            "patch",
            "propagationpolicy",
            "nginx-propagation",
            "-n",
            "default",
            "--type=merge",
            "-p",
            patch,
        ],
    );
    crate::common::eventually(
        Duration::from_secs(30),
        "member2's Work removed",
        || async {
            let out = sim.kubectl(
                "karmada-1",
                &["get", "works", "-n", "karmada-es-member2", "-o", "name"],
            );
            out.trim().is_empty().then_some(())
        },
    )
    .await;
}
