//! Kubernetes objects to API messages: the fields people use as structured fields, the
//! whole object as JSON where they need everything.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as KMeta;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::crd;
use crate::crd::karmada_spec;
use crate::error::ApiError;
use crate::proto;

pub fn meta(m: &KMeta) -> proto::ObjectMeta {
    proto::ObjectMeta {
        name: m.name.clone().unwrap_or_default(),
        namespace: m.namespace.clone().unwrap_or_default(),
        uid: m.uid.clone().unwrap_or_default(),
        resource_version: m.resource_version.clone().unwrap_or_default(),
        generation: m.generation.unwrap_or_default(),
        labels: m.labels.clone().unwrap_or_default().into_iter().collect(),
        annotations: m
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        creation_timestamp: m
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    }
}

fn condition(c: &crd::Condition) -> proto::Condition {
    proto::Condition {
        r#type: c.type_.clone(),
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: c.last_transition_time.clone(),
        observed_generation: c.observed_generation.unwrap_or_default(),
    }
}

fn clamp(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub fn stats(s: &crd::InstanceStats, last_sync: Option<&str>) -> proto::InstanceStats {
    proto::InstanceStats {
        clusters_total: clamp(s.clusters_total),
        clusters_ready: clamp(s.clusters_ready),
        nodes_total: clamp(s.nodes_total),
        nodes_ready: clamp(s.nodes_ready),
        cpu_allocatable: s.cpu_allocatable.clone(),
        cpu_allocated: s.cpu_allocated.clone(),
        memory_allocatable: s.memory_allocatable.clone(),
        memory_allocated: s.memory_allocated.clone(),
        pods_allocatable: s.pods_allocatable.clone(),
        pods_allocated: s.pods_allocated.clone(),
        propagation_policies: clamp(s.propagation_policies),
        override_policies: clamp(s.override_policies),
        cluster_propagation_policies: clamp(s.cluster_propagation_policies),
        cluster_override_policies: clamp(s.cluster_override_policies),
        workloads: clamp(s.workloads),
        namespaces: clamp(s.namespaces),
        resource_bindings: clamp(s.resource_bindings),
        last_sync_time: last_sync.unwrap_or_default().to_string(),
    }
}

/// The name standing for an instance the caller may not view, where a shared member names
/// it: that one exists is said, not which.
pub const HIDDEN_INSTANCE: &str = "(an instance you may not view)";

/// `i` as `visible` lets its caller see it: the other instances of a shared member are
/// named only where the caller may view them.
pub fn instance(i: &crd::Instance, visible: &dyn Fn(&str) -> bool) -> proto::Instance {
    let spec = &i.spec;
    let karmada = spec.managed.as_ref().and_then(|m| m.karmada_spec.as_ref());
    let status = i.status.as_ref().map(|s| proto::InstanceStatus {
        phase: format!("{:?}", s.phase),
        conditions: s.conditions.iter().map(condition).collect(),
        observed_generation: s.observed_generation.unwrap_or_default(),
        karmada_version: s.karmada_version.clone().unwrap_or_default(),
        kubernetes_version: s.kubernetes_version.clone().unwrap_or_default(),
        stats: s
            .stats
            .as_ref()
            .map(|st| stats(st, s.last_sync_time.as_deref())),
        certificates: s
            .certificates
            .iter()
            .map(|c| proto::Certificate {
                name: c.name.clone(),
                subject: c.subject.clone(),
                not_before: c.not_before.clone().unwrap_or_default(),
                not_after: c.not_after.clone(),
            })
            .collect(),
        last_backup: s
            .last_backup
            .as_ref()
            .map(|b| b.name.clone())
            .unwrap_or_default(),
        last_backup_time: s
            .last_backup
            .as_ref()
            .map(|b| b.completed.clone())
            .unwrap_or_default(),
        shared_members: s
            .shared_members
            .iter()
            .map(|m| proto::SharedMember {
                cluster: m.cluster.clone(),
                instances: m
                    .instances
                    .iter()
                    .map(|o| match visible(o) {
                        true => o.clone(),
                        false => HIDDEN_INSTANCE.to_string(),
                    })
                    .collect(),
            })
            .collect(),
        drift: s
            .drift
            .iter()
            .map(|d| proto::ClassDrift {
                field: d.field.clone(),
                class_value: d.class.clone(),
                instance_value: d.instance.clone(),
                overridden: d.overridden,
            })
            .collect(),
        control_plane: s.control_plane.as_ref().map(|c| proto::ControlPlaneUsage {
            pods: i32::try_from(c.pods).unwrap_or(i32::MAX),
            cpu_requests: c.cpu_requests.clone(),
            memory_requests: c.memory_requests.clone(),
            containers_without_requests: i32::try_from(c.containers_without_requests)
                .unwrap_or(i32::MAX),
        }),
        last_request_time: s.last_request_time.clone().unwrap_or_default(),
        hibernation: s.hibernation.as_ref().map(|h| proto::HibernationStatus {
            state: format!("{:?}", h.state),
            reason: h.reason.clone(),
            since: h.since.clone().unwrap_or_default(),
            last_hibernate_seconds: h.last_hibernate_seconds.unwrap_or_default(),
            last_wake_seconds: h.last_wake_seconds.unwrap_or_default(),
            wakes: h.wakes,
            hibernated_seconds: h.hibernated_seconds,
            etcd: h.etcd.clone(),
        }),
    });
    proto::Instance {
        metadata: Some(meta(&i.metadata)),
        spec: Some(proto::InstanceSpec {
            mode: match spec.mode {
                crd::InstanceMode::External => proto::InstanceMode::External as i32,
                crd::InstanceMode::Managed => proto::InstanceMode::Managed as i32,
            },
            kubeconfig_secret_ref: spec.external.as_ref().map(|e| proto::SecretKeyRef {
                namespace: e.kubeconfig_secret_ref.namespace.clone(),
                name: e.kubeconfig_secret_ref.name.clone(),
                key: e.kubeconfig_secret_ref.key.clone().unwrap_or_default(),
            }),
            managed_namespace: spec
                .managed
                .as_ref()
                .and_then(|m| m.namespace.clone())
                .unwrap_or_default(),
            paused: spec.paused,
            karmada_version: karmada
                .and_then(karmada_spec::version_of)
                .unwrap_or_default(),
            image_registry: karmada
                .and_then(karmada_spec::registry_of)
                .unwrap_or_default(),
            component_images: karmada
                .map(karmada_spec::images_of)
                .unwrap_or_default()
                .into_iter()
                .map(|(c, i)| {
                    let image = proto::ComponentImage {
                        repository: i.repository,
                        tag: i.tag,
                    };
                    (c, image)
                })
                .collect(),
            crd_tarball_url: karmada
                .and_then(karmada_spec::crd_tarball_of)
                .unwrap_or_default(),
            component_replicas: karmada
                .map(karmada_spec::replicas_of)
                .unwrap_or_default()
                .into_iter()
                .collect(),
            backup_schedule: spec
                .backup_schedule
                .as_ref()
                .map(|b| proto::BackupSchedule {
                    interval_minutes: b.interval_minutes as i32,
                    keep: b.keep() as i32,
                }),
            class_name: spec.class_name.clone().unwrap_or_default(),
        }),
        status,
    }
}

/// The spec of a create/update request, validated with field names of the request.
pub fn instance_spec(spec: Option<&proto::InstanceSpec>) -> Result<crd::InstanceSpec, ApiError> {
    let spec = spec.ok_or_else(|| ApiError::invalid("instance.spec", "is required"))?;
    let mode = match proto::InstanceMode::try_from(spec.mode) {
        Ok(proto::InstanceMode::External) => crd::InstanceMode::External,
        Ok(proto::InstanceMode::Managed) => crd::InstanceMode::Managed,
        _ => {
            return Err(ApiError::invalid(
                "instance.spec.mode",
                "must be INSTANCE_MODE_EXTERNAL or INSTANCE_MODE_MANAGED",
            ))
        }
    };
    let external = match (mode, &spec.kubeconfig_secret_ref) {
        (crd::InstanceMode::External, None) => {
            return Err(ApiError::invalid(
                "instance.spec.kubeconfig_secret_ref",
                "is required with INSTANCE_MODE_EXTERNAL",
            ))
        }
        (crd::InstanceMode::External, Some(r)) => {
            crate::error::check_name("instance.spec.kubeconfig_secret_ref.name", &r.name)?;
            crate::error::check_name(
                "instance.spec.kubeconfig_secret_ref.namespace",
                &r.namespace,
            )?;
            Some(crd::ExternalSpec {
                kubeconfig_secret_ref: crd::SecretKeyRef {
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    key: Some(r.key.clone()).filter(|k| !k.is_empty()),
                },
            })
        }
        (crd::InstanceMode::Managed, _) => None,
    };
    let managed = match mode {
        crd::InstanceMode::Managed => Some(crd::ManagedSpec {
            namespace: Some(spec.managed_namespace.clone()).filter(|n| !n.is_empty()),
            karmada_spec: managed_fragment(spec)?,
            overrides: None,
        }),
        crd::InstanceMode::External => {
            let managed_only = [
                ("karmada_version", spec.karmada_version.is_empty()),
                ("image_registry", spec.image_registry.is_empty()),
                ("component_images", spec.component_images.is_empty()),
                ("crd_tarball_url", spec.crd_tarball_url.is_empty()),
                ("component_replicas", spec.component_replicas.is_empty()),
            ];
            let managed_only = [
                managed_only.as_slice(),
                &[("class_name", spec.class_name.is_empty())],
            ]
            .concat();
            if let Some((field, _)) = managed_only.iter().find(|(_, empty)| !empty) {
                return Err(ApiError::invalid(
                    format!("instance.spec.{field}"),
                    "is only for INSTANCE_MODE_MANAGED (an External instance runs what it runs)",
                ));
            }
            None
        }
    };
    if !spec.class_name.is_empty() {
        crate::error::check_name("instance.spec.class_name", &spec.class_name)?;
    }
    Ok(crd::InstanceSpec {
        class_name: Some(spec.class_name.clone()).filter(|c| !c.is_empty()),
        mode,
        external,
        managed,
        paused: spec.paused,
        // Set on the Instance by whoever runs Kairship, not through the API.
        cache_budget: None,
        // Set on the Instance (kubectl) until the API carries it.
        maintenance_window: None,
        // Set on the Instance (kubectl) until the API carries it.
        hibernation: None,
        // The class's, when it is made from one (`create_instance`), kept by updates.
        guardrails: Vec::new(),
        backup_schedule: spec
            .backup_schedule
            .as_ref()
            .map(backup_schedule)
            .transpose()?
            .flatten(),
    })
}

/// A backup schedule as asked; `interval_minutes` 0 turns it off.
fn backup_schedule(b: &proto::BackupSchedule) -> Result<Option<crd::BackupScheduleSpec>, ApiError> {
    let field = "instance.spec.backup_schedule";
    if b.interval_minutes == 0 {
        return Ok(None);
    }
    if !(1..=10_080).contains(&b.interval_minutes) {
        return Err(ApiError::invalid(
            format!("{field}.interval_minutes"),
            format!(
                "is {}; it must be 1 to 10080 (a week), or 0 for no schedule",
                b.interval_minutes
            ),
        ));
    }
    if !(0..=100).contains(&b.keep) {
        return Err(ApiError::invalid(
            format!("{field}.keep"),
            format!("is {}; it must be 1 to 100 (0: 7)", b.keep),
        ));
    }
    Ok(Some(crd::BackupScheduleSpec {
        interval_minutes: b.interval_minutes as u32,
        keep: (b.keep > 0).then_some(b.keep as u32),
    }))
}

/// The part of a managed instance's Karmada spec a request sets, in karmada-operator's
/// terms (None: it sets nothing, so an update keeps everything).
fn managed_fragment(spec: &proto::InstanceSpec) -> Result<Option<Value>, ApiError> {
    let mut fragment = serde_json::json!({});
    if !spec.karmada_version.is_empty() {
        karmada_spec::check_version("instance.spec.karmada_version", &spec.karmada_version)?;
        karmada_spec::merge(
            &mut fragment,
            &karmada_spec::for_version(&spec.karmada_version),
        );
    }
    if !spec.image_registry.is_empty() {
        let registry =
            karmada_spec::for_registry("instance.spec.image_registry", &spec.image_registry)?;
        karmada_spec::merge(&mut fragment, &registry);
    }
    for (component, image) in &spec.component_images {
        let image = karmada_spec::Image {
            repository: image.repository.clone(),
            tag: image.tag.clone(),
        };
        let field = format!("instance.spec.component_images[{component:?}]");
        karmada_spec::merge(
            &mut fragment,
            &karmada_spec::for_image(&field, component, &image)?,
        );
    }
    for (component, replicas) in &spec.component_replicas {
        let field = format!("instance.spec.component_replicas[{component:?}]");
        karmada_spec::merge(
            &mut fragment,
            &karmada_spec::for_replicas(&field, component, *replicas)?,
        );
    }
    if !spec.crd_tarball_url.is_empty() {
        let crds =
            karmada_spec::for_crd_tarball("instance.spec.crd_tarball_url", &spec.crd_tarball_url)?;
        karmada_spec::merge(&mut fragment, &crds);
    }
    Ok(Some(fragment).filter(|f| f.as_object().is_some_and(|o| !o.is_empty())))
}

fn str_at(v: &Value, path: &str) -> String {
    v.pointer(path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn resources(v: &Value) -> proto::ResourceList {
    proto::ResourceList {
        cpu: str_at(v, "/cpu"),
        memory: str_at(v, "/memory"),
        pods: str_at(v, "/pods"),
    }
}

pub fn conditions(v: &Value) -> Vec<proto::Condition> {
    v.as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| proto::Condition {
                    r#type: str_at(c, "/type"),
                    status: str_at(c, "/status"),
                    reason: str_at(c, "/reason"),
                    message: str_at(c, "/message"),
                    last_transition_time: str_at(c, "/lastTransitionTime"),
                    observed_generation: c
                        .pointer("/observedGeneration")
                        .and_then(Value::as_i64)
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn object_json(o: &DynamicObject) -> String {
    serde_json::to_string(o).unwrap_or_default()
}

pub fn cluster(c: &DynamicObject) -> proto::Cluster {
    let d = &c.data;
    let summary = d
        .pointer("/status/resourceSummary")
        .cloned()
        .unwrap_or_default();
    proto::Cluster {
        metadata: Some(meta(&c.metadata)),
        ready: crate::actors::instance::stats::cluster_ready(d),
        kubernetes_version: str_at(d, "/status/kubernetesVersion"),
        sync_mode: str_at(d, "/spec/syncMode"),
        api_endpoint: str_at(d, "/spec/apiEndpoint"),
        provider: str_at(d, "/spec/provider"),
        region: str_at(d, "/spec/region"),
        zone: str_at(d, "/spec/zone"),
        nodes_total: clamp(
            d.pointer("/status/nodeSummary/totalNum")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
        ),
        nodes_ready: clamp(
            d.pointer("/status/nodeSummary/readyNum")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
        ),
        allocatable: Some(resources(&summary["allocatable"])),
        allocated: Some(resources(&summary["allocated"])),
        allocating: Some(resources(&summary["allocating"])),
        conditions: conditions(&d["status"]["conditions"]),
        object_json: object_json(c),
        taints: taints(&d["spec"]["taints"]),
        unschedulable: d
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .is_some_and(|ts| {
                ts.iter()
                    .any(|t| t["key"] == UNSCHEDULABLE && t["effect"] == "NoSchedule")
            }),
    }
}

/// Karmada's cordon taint (`karmadactl cordon`).
pub const UNSCHEDULABLE: &str = "cluster.karmada.io/unschedulable";

pub fn taints(v: &Value) -> Vec<proto::Taint> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|t| proto::Taint {
            key: str_at(t, "/key"),
            value: str_at(t, "/value"),
            effect: str_at(t, "/effect"),
            time_added: str_at(t, "/timeAdded"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_members_name_only_the_instances_the_caller_may_view() {
        let mut i = crate::controllers::testing::instance("team-a");
        i.status = Some(crd::InstanceStatus {
            shared_members: vec![crd::SharedMember {
                cluster: "member1".into(),
                instances: vec!["team-b".into(), "secret-team".into()],
            }],
            ..Default::default()
        });
        let shown = instance(&i, &|name: &str| name != "secret-team");
        let members = shown.status.map(|s| s.shared_members).unwrap_or_default();
        assert_eq!(members.len(), 1);
        assert_eq!(members[0].instances, ["team-b", HIDDEN_INSTANCE]);
    }
}
