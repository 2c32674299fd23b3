//! The cluster's add-ons, as a kubeadm cluster has them: CoreDNS (`kube-dns` at the
//! cluster's DNS address) answering for `cluster.local` from the host's Services and pods.

use serde_json::json;

use super::net;
use crate::karmada::{apply, ar};
use crate::Error;

pub const COREDNS_VERSION: &str = "v1.14.7";

fn image() -> String {
    format!("kairship.local/coredns:{COREDNS_VERSION}")
}

/// What kubeadm installs, trimmed to this machine: no upstream resolver to forward to
/// (names outside the cluster are refused), port 1053 inside the pod so CoreDNS runs
/// without privileges.
const COREFILE: &str = ".:1053 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    reload
    loadbalance
}
";

pub async fn coredns(client: &kube::Client) -> Result<(), Error> {
    let labels = json!({"k8s-app": "kube-dns"});
    let objects = [
        (
            ar("", "v1", "ServiceAccount", "serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "coredns", "namespace": "kube-system"}}),
        ),
        (
            ar(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
                "clusterroles",
            ),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "system:coredns"},
                   "rules": [
                       {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                        "verbs": ["list", "watch"]},
                       {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                        "verbs": ["list", "watch"]}]}),
        ),
        (
            ar(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
                "clusterrolebindings",
            ),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "system:coredns"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
                   "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]}),
        ),
        (
            ar("", "v1", "ConfigMap", "configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "coredns", "namespace": "kube-system"},
                   "data": {"Corefile": COREFILE}}),
        ),
        (
            ar("apps", "v1", "Deployment", "deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
                   "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                       "spec": {
                         "serviceAccountName": "coredns",
                         "priorityClassName": "system-cluster-critical",
                         "dnsPolicy": "Default",
                         "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532},
                         "containers": [{
                           "name": "coredns", "image": image(), "imagePullPolicy": "IfNotPresent",
                           "args": ["-conf", "/etc/coredns/Corefile"],
                           "ports": [{"name": "dns", "containerPort": 1053, "protocol": "UDP"},
                                     {"name": "dns-tcp", "containerPort": 1053, "protocol": "TCP"}],
                           "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
                           "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 10},
                           "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                               "capabilities": {"drop": ["ALL"]}},
                           "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": true}]}],
                         "volumes": [{"name": "config", "configMap": {"name": "coredns"}}]}}}}),
        ),
        (
            ar("", "v1", "Service", "services"),
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
                   "spec": {"selector": labels, "clusterIP": net::DNS_SERVICE_IP.to_string(),
                     "ports": [{"name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP"},
                               {"name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP"}]}}),
        ),
    ];
    for (res, obj) in objects {
        apply(client, &res, obj).await?;
    }
    Ok(())
}
