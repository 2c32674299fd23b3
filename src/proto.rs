//! Code generated from `proto/` (package `kairship.v1alpha1`): messages, tonic servers
//! and clients, and the encoded descriptor set.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("kairship.v1alpha1");

/// The encoded `FileDescriptorSet` of the whole API, for reflection and REST mapping.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/kairship_descriptor.bin"));

#[cfg(test)]
mod tests {
    use prost::Message;

    #[test]
    fn descriptor_holds_the_eight_services_of_the_pinned_package() {
        let fds = prost_types::FileDescriptorSet::decode(super::FILE_DESCRIPTOR_SET)
            .expect("descriptor decodes");
        let ours: Vec<_> = fds
            .file
            .iter()
            .filter(|f| f.package() == "kairship.v1alpha1")
            .collect();
        let services: Vec<(&str, Vec<&str>)> = ours
            .iter()
            .flat_map(|f| f.service.iter())
            .map(|s| (s.name(), s.method.iter().map(|m| m.name()).collect()))
            .collect();
        let names: Vec<&str> = services.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "InstanceService",
                "ClusterService",
                "WorkloadService",
                "PolicyService",
                "SupervisorService",
                "AccessService",
                "SearchService",
                "RolloutService"
            ]
        );
        let instance = &services[0].1;
        for m in [
            "CreateInstance",
            "GetInstance",
            "ListInstances",
            "UpdateInstance",
            "DeleteInstance",
            "GetInstanceStats",
        ] {
            assert!(instance.contains(&m), "{m} missing from InstanceService");
        }
        assert!(services[4].1.contains(&"RestartInstance"));
    }
}
