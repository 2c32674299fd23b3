//! The Python `kubernetes` client (PyPI) against the simulator: CRUD, custom objects and
//! `watch.Watch().stream`. The checks live in tests/python/sim_client.py.

use std::process::Command;

use crate::common::{repo_path, Sim};

fn python() -> String {
    if let Ok(p) = std::env::var("KAIRSHIP_PYTHON") {
        return p;
    }
    let venv = repo_path(".venv/bin/python");
    assert!(
        venv.exists(),
        "{} missing: run scripts/install-test-deps.sh",
        venv.display()
    );
    venv.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_crud_custom_objects_and_watch() {
    let sim = Sim::start(1).await;
    let kubeconfig = sim.kubeconfig("karmada-1");
    let script = repo_path("tests/python/sim_client.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python()).arg(script).arg(kubeconfig).output()
    })
    .await
    .expect("join")
    .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
