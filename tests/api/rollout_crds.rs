//! A rollout's plan shows what changes in Karmada's CRDs between the two releases, read
//! from the releases' CRD tarballs on the host (the ConfigMaps Kairship serves to
//! karmada-operator): Karmada's own CRDs as one release, and a next release that stops
//! serving a version of ResourceBindings, drops PropagationPolicy's `preemption` and
//! changes the default of its `conflictResolution`. The version no longer served blocks
//! the rollout (refused unless forced, naming it); the rest are notes; a release with no
//! tarball says the changes are not known.

use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{
    CreateInstanceRequest, PlanRolloutRequest, RolloutSpec, StartRolloutRequest,
};
use kube::api::PostParams;
use serde_json::json;

use crate::common::eventually;

const FROM: &str = "v1.12.0";
const TO: &str = "v1.13.0";

/// `files` (name, YAML) as a release's `crds.tar.gz`.
fn tarball(files: &[(String, String)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("crds/bases/{name}"), text.as_bytes())
            .expect("append");
    }
    let raw = tar.into_inner().expect("tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &raw).expect("gzip");
    gz.finish().expect("gzip")
}

/// Karmada's CRDs from ../shared/karmada/crds, each changed by `edit`.
fn release(edit: impl Fn(&str, String) -> String) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/karmada/crds");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("../shared/karmada/crds")
        .filter_map(|e| e.ok())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).expect("CRD");
            let text = edit(&name, text);
            (name, text)
        })
        .collect();
    files.sort();
    tarball(&files)
}

async fn put_release(host: &kube::Client, version: &str, gz: &[u8]) {
    use base64::Engine;
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": format!("karmada-crds-{}", version.replace('.', "-")),
                     "labels": {"kairship.io/karmada-crds": version}},
        "binaryData": {"crds.tar.gz": base64::engine::general_purpose::STANDARD.encode(gz)}}))
    .expect("ConfigMap");
    kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        host.clone(),
        crate::harness::NS,
    )
    .create(&PostParams::default(), &cm)
    .await
    .expect("ConfigMap created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_shows_the_crd_changes_and_blocks_on_a_version_no_longer_served() {
    let api = crate::server::Api::start(1).await;
    let host = api.env.host.clone();
    put_release(&host, FROM, &release(|_, t| t)).await;
    put_release(
        &host,
        TO,
        &release(|name, t| match name {
            "work.karmada.io_resourcebindings.yaml" => {
                t.replacen("    served: true", "    served: false", 1)
            }
            "policy.karmada.io_propagationpolicies.yaml" => t
                .replacen(
                    "                default: Abort",
                    "                default: Overwrite",
                    1,
                )
                .replacen(
                    "              preemption:",
                    "              preemptionPolicy:",
                    1,
                ),
            _ => t,
        }),
    )
    .await;
    InstanceServiceClient::new(api.channel.clone())
        .create_instance(CreateInstanceRequest {
            instance: Some(crate::server::managed_instance("team-crds")),
        })
        .await
        .expect("created");
    api.env
        .wait_phase(
            "team-crds",
            kairship::crd::Phase::Running,
            Duration::from_secs(60),
        )
        .await;
    // Two PropagationPolicies in the instance, one setting the field the new release
    // drops; the other gets it set by the CRD's default, as kube-apiserver stores it (and
    // the field whose default changes likewise, so neither takes the new default).
    let pps: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        api.env.sim.client("team-crds").await,
        "default",
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "policy.karmada.io",
                "v1alpha1",
                "PropagationPolicy",
            ),
            "propagationpolicies",
        ),
    );
    for (name, preemption) in [("pre", Some("Always")), ("plain", None)] {
        let mut spec = serde_json::json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]});
        if let Some(p) = preemption {
            spec["preemption"] = p.into();
        }
        let pp: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
        .expect("a policy");
        pps.create(&Default::default(), &pp)
            .await
            .expect("policy created");
    }
    let spec = |to: &str| RolloutSpec {
        karmada_version: to.into(),
        canary: 1,
        percentages: vec![100],
        ..Default::default()
    };
    let mut c = RolloutServiceClient::new(api.channel.clone());
    let plan = eventually(
        Duration::from_secs(30),
        "team-crds at v1.12.0 in the plan",
        || {
            let mut c = c.clone();
            let spec = spec(TO);
            async move {
                let p = c
                    .plan_rollout(PlanRolloutRequest { spec: Some(spec) })
                    .await
                    .ok()?
                    .into_inner();
                let i = p
                    .waves
                    .iter()
                    .flat_map(|w| &w.instances)
                    .find(|i| i.name == "team-crds")?;
                // Once the instance's cache holds both policies and the binding Karmada
                // made from them (it comes a moment after them).
                let counted = i.notes.iter().any(|n| n.starts_with("2 PropagationPolicy"))
                    && i.notes
                        .iter()
                        .any(|n| n.contains("ResourceBinding object(s)"));
                (i.from_version == FROM && counted).then_some(p)
            }
        },
    )
    .await;
    let changes = plan
        .crd_changes
        .iter()
        .find(|c| c.from_version == FROM && c.to_version == TO)
        .unwrap_or_else(|| panic!("no CRD changes {FROM} -> {TO}: {plan:?}"));
    assert!(changes.unknown.is_empty(), "{changes:?}");
    assert_eq!(
        changes.changes,
        [
            "resourcebindings.work.karmada.io is no longer served at v1alpha1",
            "propagationpolicies.policy.karmada.io v1alpha1 changes the default of spec.conflictResolution from \"Abort\" to \"Overwrite\"",
            "propagationpolicies.policy.karmada.io v1alpha1 drops the field spec.preemption",
        ],
        "only what changed, removals first"
    );
    let ours = plan
        .waves
        .iter()
        .flat_map(|w| &w.instances)
        .find(|i| i.name == "team-crds")
        .expect("planned");
    assert!(
        ours.blocking
            .iter()
            .any(|b| b.contains("no longer served at v1alpha1 in v1.13.0")),
        "{ours:?}"
    );
    assert!(
        ours.notes
            .iter()
            .any(|n| n.contains("drops the field spec.preemption")),
        "{ours:?}"
    );
    // What the changes touch in this instance, counted from its cache.
    let dropped = "2 PropagationPolicy object(s) in this instance set spec.preemption, which v1.13.0 drops (its value is pruned)";
    assert!(ours.notes.iter().any(|n| n == dropped), "{ours:?}");
    assert!(
        !ours
            .notes
            .iter()
            .any(|n| n.contains("take its new default")),
        "{ours:?}"
    );
    assert!(
        ours.notes.iter().any(|n| n.contains("ResourceBinding object(s) in this instance are served at v1alpha1, which v1.13.0 no longer serves")),
        "{ours:?}"
    );
    // Refused unless forced, naming the version that goes away.
    let e = c
        .start_rollout(StartRolloutRequest {
            name: "to-13".into(),
            spec: Some(spec(TO)),
            options: None,
        })
        .await
        .expect_err("blocked");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message()
            .contains("resourcebindings.work.karmada.io is no longer served"),
        "{}",
        e.message()
    );
    // A release with no tarball on the host: not known, said so.
    let plan = c
        .plan_rollout(PlanRolloutRequest {
            spec: Some(spec("v1.12.9")),
        })
        .await
        .expect("a plan")
        .into_inner();
    let unknown = plan
        .crd_changes
        .iter()
        .find(|c| c.to_version == "v1.12.9")
        .expect("the pair");
    assert!(
        unknown.unknown.contains("no CRD tarball of v1.12.9"),
        "{unknown:?}"
    );
    api.stop().await;
}
