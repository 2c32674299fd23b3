//! The Python `kubernetes` client (PyPI) against the simulator: CRUD, custom objects and
//! `watch.Watch().stream`. The checks live in tests/python/sim_client.py.

use crate::common::{run_python, Sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_crud_custom_objects_and_watch() {
    let sim = Sim::start(1).await;
    run_python(
        "sim_client.py",
        vec![sim.kubeconfig("karmada-1").display().to_string()],
    )
    .await;
}
