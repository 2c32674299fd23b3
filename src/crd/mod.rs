//! Kairship's own resources in the host cluster (`kairship.io/v1alpha1`): `Instance`,
//! one per Karmada instance, and `InstanceRegistration`, the record a global management
//! module binds roles against, `InstanceRoleBinding`, the roles granted on instances,
//! `InstanceClass`, what many instances share, and `FleetRollout`, one change rolled
//! across many instances in waves.

mod binding;
mod class;
pub mod cluster_profile;
pub mod guardrail;
mod instance;
pub mod karmada_crds;
pub mod karmada_spec;
pub mod operator_certs;
mod registration;
mod rollout;

pub use binding::*;
pub use class::*;
pub use instance::*;
pub use registration::*;
pub use rollout::*;

use kube::CustomResourceExt;

/// Finalizer that guarantees cleanup of an instance's managed objects and registration.
pub const FINALIZER: &str = "kairship.io/cleanup";
/// Set (to a timestamp) by RestartInstance: every replica restarts that instance's actor
/// when the value changes.
pub const RESTART_ANNOTATION: &str = "kairship.io/restartedAt";

/// Every CRD Kairship installs (SIG Multicluster's ClusterProfile last: Kairship writes
/// the cluster inventory, and creates its CRD only where there is none).
pub fn all(
) -> [k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition; 6]
{
    [
        Instance::crd(),
        InstanceRegistration::crd(),
        InstanceRoleBinding::crd(),
        FleetRollout::crd(),
        InstanceClass::crd(),
        cluster_profile::ClusterProfile::crd(),
    ]
}

/// Every CRD Kairship installs, as one multi-document YAML stream (what `kairship crds`
/// prints and `deploy/crds/` holds).
pub fn crds_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploy_and_chart_crds_match_the_types() {
        let generated = crds_yaml().expect("renders");
        for file in [
            "deploy/crds/kairship.io.yaml",
            "deploy/chart/kairship/crds/kairship.io.yaml",
        ] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
            let on_disk = std::fs::read_to_string(&path).expect("the CRD file exists");
            assert!(
                on_disk == generated,
                "{file} drifted from the Rust types: run `cargo run -- crds > {file}`"
            );
        }
    }

    #[test]
    fn external_instances_need_a_secret_reference() {
        let spec = InstanceSpec {
            mode: InstanceMode::External,
            external: None,
            managed: None,
            paused: false,
            cache_budget: None,
            backup_schedule: None,
            maintenance_window: None,
            class_name: None,
            guardrails: Vec::new(),
            hibernation: None,
        };
        assert!(spec
            .validate()
            .expect_err("invalid")
            .contains("spec.external"));
        let managed = InstanceSpec {
            mode: InstanceMode::Managed,
            ..spec
        };
        assert!(managed.validate().is_ok());
    }
}
