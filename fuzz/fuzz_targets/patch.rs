//! PATCH bodies (JSON patch, merge patch, strategic merge patch, apply): applying never
//! panics, and a failed patch leaves the target as it was.
#![no_main]
use kairship_sim::patch::{apply, PatchKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    let kind = match kind % 4 {
        0 => "application/json-patch+json",
        1 => "application/merge-patch+json",
        2 => "application/strategic-merge-patch+json",
        _ => "application/apply-patch+yaml",
    };
    let Ok(kind) = PatchKind::from_content_type(kind) else {
        return;
    };
    let original = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}
    });
    let mut target = original.clone();
    if apply(kind, &mut target, body).is_err() {
        assert_eq!(target, original, "a failed patch changed the object");
    }
});
