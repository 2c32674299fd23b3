//! `kubectl get` Tables served from Kairship's cache match the simulated instance's own.

use std::time::Duration;

use crate::common::shared_karmada;
use crate::server::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_from_the_cache_print_what_the_instance_prints() {
    let api = Api::start(1).await;
    for f in ["nginx-deployment.yaml", "nginx-propagationpolicy.yaml"] {
        let path = shared_karmada(&format!("samples/{f}"));
        api.env.sim.kubectl(
            "karmada-1",
            &["apply", "-n", "default", "-f", &path.display().to_string()],
        );
    }
    let proxy = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    kairship_test_support::scenarios::tables::tables_match(&proxy, Duration::from_secs(30)).await;
}
