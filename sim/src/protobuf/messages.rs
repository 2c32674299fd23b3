//! The protobuf messages decoded, by field number (from the Kubernetes API's
//! `generated.proto` files): the objects kubectl's typed `create` subcommands build, and
//! the parts of them those commands fill.

#[derive(Clone, Copy)]
pub(super) enum Ty {
    Str,
    Bool,
    Int,
    Msg(&'static Desc),
    /// `metav1.Time`: seconds and nanos, written as RFC 3339.
    Time,
    IntOrString,
    /// Read and dropped: a status on create, which the server resets anyway.
    Skip,
    MapStr,
    MapBytes,
    MapQuantity,
}

/// One field: number, JSON name, type, repeated, and whether a zero value is kept (Go
/// pointers: `replicas: 0` is not `replicas` left out).
pub(super) struct Field(
    pub(super) u32,
    pub(super) &'static str,
    pub(super) Ty,
    pub(super) bool,
    pub(super) bool,
);

pub(super) struct Desc {
    pub(super) name: &'static str,
    pub(super) fields: &'static [Field],
}

const fn f(n: u32, name: &'static str, ty: Ty) -> Field {
    Field(n, name, ty, false, false)
}
const fn rep(n: u32, name: &'static str, ty: Ty) -> Field {
    Field(n, name, ty, true, false)
}
const fn ptr(n: u32, name: &'static str, ty: Ty) -> Field {
    Field(n, name, ty, false, true)
}

use Ty::*;

static OBJECT_META: Desc = Desc {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str),
        f(2, "generateName", Str),
        f(3, "namespace", Str),
        f(4, "selfLink", Str),
        f(5, "uid", Str),
        f(6, "resourceVersion", Str),
        f(7, "generation", Int),
        f(8, "creationTimestamp", Time),
        f(9, "deletionTimestamp", Time),
        f(10, "deletionGracePeriodSeconds", Int),
        f(11, "labels", MapStr),
        f(12, "annotations", MapStr),
        rep(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
    ],
};
static OWNER_REFERENCE: Desc = Desc {
    name: "OwnerReference",
    fields: &[
        f(1, "kind", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
        f(5, "apiVersion", Str),
        ptr(6, "controller", Bool),
        ptr(7, "blockOwnerDeletion", Bool),
    ],
};
static LABEL_SELECTOR: Desc = Desc {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", MapStr),
        rep(2, "matchExpressions", Msg(&SELECTOR_REQUIREMENT)),
    ],
};
static SELECTOR_REQUIREMENT: Desc = Desc {
    name: "LabelSelectorRequirement",
    fields: &[
        f(1, "key", Str),
        f(2, "operator", Str),
        rep(3, "values", Str),
    ],
};
static CONFIG_MAP: Desc = Desc {
    name: "ConfigMap",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", MapStr),
        f(3, "binaryData", MapBytes),
        ptr(4, "immutable", Bool),
    ],
};
static SECRET: Desc = Desc {
    name: "Secret",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", MapBytes),
        f(3, "type", Str),
        f(4, "stringData", MapStr),
        ptr(5, "immutable", Bool),
    ],
};
static NAMESPACE: Desc = Desc {
    name: "Namespace",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&NAMESPACE_SPEC)),
        f(3, "status", Skip),
    ],
};
static NAMESPACE_SPEC: Desc = Desc {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};
static SERVICE_ACCOUNT: Desc = Desc {
    name: "ServiceAccount",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(3, "imagePullSecrets", Msg(&LOCAL_REFERENCE)),
        ptr(4, "automountServiceAccountToken", Bool),
    ],
};
static LOCAL_REFERENCE: Desc = Desc {
    name: "LocalObjectReference",
    fields: &[f(1, "name", Str)],
};
static SERVICE: Desc = Desc {
    name: "Service",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&SERVICE_SPEC)),
        f(3, "status", Skip),
    ],
};
static SERVICE_SPEC: Desc = Desc {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", Msg(&SERVICE_PORT)),
        f(2, "selector", MapStr),
        f(3, "clusterIP", Str),
        f(4, "type", Str),
        rep(5, "externalIPs", Str),
        f(7, "sessionAffinity", Str),
        f(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        f(10, "externalName", Str),
        f(11, "externalTrafficPolicy", Str),
        f(12, "healthCheckNodePort", Int),
        f(13, "publishNotReadyAddresses", Bool),
        f(17, "ipFamilyPolicy", Str),
        rep(18, "clusterIPs", Str),
        rep(19, "ipFamilies", Str),
        ptr(20, "allocateLoadBalancerNodePorts", Bool),
        f(21, "loadBalancerClass", Str),
        f(22, "internalTrafficPolicy", Str),
        f(23, "trafficDistribution", Str),
    ],
};
static SERVICE_PORT: Desc = Desc {
    name: "ServicePort",
    fields: &[
        f(1, "name", Str),
        f(2, "protocol", Str),
        f(3, "port", Int),
        f(4, "targetPort", IntOrString),
        f(5, "nodePort", Int),
        f(6, "appProtocol", Str),
    ],
};
static POD: Desc = Desc {
    name: "Pod",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_SPEC)),
        f(3, "status", Skip),
    ],
};
static POD_TEMPLATE: Desc = Desc {
    name: "PodTemplateSpec",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_SPEC)),
    ],
};
static POD_SPEC: Desc = Desc {
    name: "PodSpec",
    fields: &[
        rep(2, "containers", Msg(&CONTAINER)),
        f(3, "restartPolicy", Str),
        ptr(4, "terminationGracePeriodSeconds", Int),
        ptr(5, "activeDeadlineSeconds", Int),
        f(6, "dnsPolicy", Str),
        f(7, "nodeSelector", MapStr),
        f(8, "serviceAccountName", Str),
        f(9, "serviceAccount", Str),
        f(10, "nodeName", Str),
        f(11, "hostNetwork", Bool),
        f(12, "hostPID", Bool),
        f(13, "hostIPC", Bool),
        rep(15, "imagePullSecrets", Msg(&LOCAL_REFERENCE)),
        f(16, "hostname", Str),
        f(17, "subdomain", Str),
        f(19, "schedulerName", Str),
        rep(20, "initContainers", Msg(&CONTAINER)),
        ptr(21, "automountServiceAccountToken", Bool),
        f(24, "priorityClassName", Str),
        ptr(25, "priority", Int),
        ptr(27, "shareProcessNamespace", Bool),
        f(29, "runtimeClassName", Str),
        ptr(30, "enableServiceLinks", Bool),
        f(31, "preemptionPolicy", Str),
        ptr(35, "setHostnameAsFQDN", Bool),
        ptr(37, "hostUsers", Bool),
        f(41, "hostnameOverride", Str),
    ],
};
static CONTAINER: Desc = Desc {
    name: "Container",
    fields: &[
        f(1, "name", Str),
        f(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        f(5, "workingDir", Str),
        rep(6, "ports", Msg(&CONTAINER_PORT)),
        rep(7, "env", Msg(&ENV_VAR)),
        f(8, "resources", Msg(&RESOURCES)),
        f(13, "terminationMessagePath", Str),
        f(14, "imagePullPolicy", Str),
        f(16, "stdin", Bool),
        f(17, "stdinOnce", Bool),
        f(18, "tty", Bool),
        f(20, "terminationMessagePolicy", Str),
        f(24, "restartPolicy", Str),
    ],
};
static CONTAINER_PORT: Desc = Desc {
    name: "ContainerPort",
    fields: &[
        f(1, "name", Str),
        f(2, "hostPort", Int),
        f(3, "containerPort", Int),
        f(4, "protocol", Str),
        f(5, "hostIP", Str),
    ],
};
static ENV_VAR: Desc = Desc {
    name: "EnvVar",
    fields: &[f(1, "name", Str), f(2, "value", Str)],
};
static RESOURCES: Desc = Desc {
    name: "ResourceRequirements",
    fields: &[f(1, "limits", MapQuantity), f(2, "requests", MapQuantity)],
};
static DEPLOYMENT: Desc = Desc {
    name: "Deployment",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&DEPLOYMENT_SPEC)),
        f(3, "status", Skip),
    ],
};
static DEPLOYMENT_SPEC: Desc = Desc {
    name: "DeploymentSpec",
    fields: &[
        ptr(1, "replicas", Int),
        f(2, "selector", Msg(&LABEL_SELECTOR)),
        f(3, "template", Msg(&POD_TEMPLATE)),
        f(4, "strategy", Msg(&STRATEGY)),
        f(5, "minReadySeconds", Int),
        ptr(6, "revisionHistoryLimit", Int),
        f(7, "paused", Bool),
        ptr(9, "progressDeadlineSeconds", Int),
    ],
};
static STRATEGY: Desc = Desc {
    name: "DeploymentStrategy",
    fields: &[
        f(1, "type", Str),
        f(2, "rollingUpdate", Msg(&ROLLING_UPDATE)),
    ],
};
static ROLLING_UPDATE: Desc = Desc {
    name: "RollingUpdateDeployment",
    fields: &[
        f(1, "maxUnavailable", IntOrString),
        f(2, "maxSurge", IntOrString),
    ],
};
static JOB: Desc = Desc {
    name: "Job",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&JOB_SPEC)),
        f(3, "status", Skip),
    ],
};
static JOB_SPEC: Desc = Desc {
    name: "JobSpec",
    fields: &[
        ptr(1, "parallelism", Int),
        ptr(2, "completions", Int),
        ptr(3, "activeDeadlineSeconds", Int),
        f(4, "selector", Msg(&LABEL_SELECTOR)),
        ptr(5, "manualSelector", Bool),
        f(6, "template", Msg(&POD_TEMPLATE)),
        ptr(7, "backoffLimit", Int),
        ptr(8, "ttlSecondsAfterFinished", Int),
        f(9, "completionMode", Str),
        ptr(10, "suspend", Bool),
        ptr(12, "backoffLimitPerIndex", Int),
        ptr(13, "maxFailedIndexes", Int),
        f(14, "podReplacementPolicy", Str),
        f(15, "managedBy", Str),
    ],
};
static ROLE: Desc = Desc {
    name: "Role",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "rules", Msg(&POLICY_RULE)),
        f(3, "aggregationRule", Msg(&AGGREGATION_RULE)),
    ],
};
static POLICY_RULE: Desc = Desc {
    name: "PolicyRule",
    fields: &[
        rep(1, "verbs", Str),
        rep(2, "apiGroups", Str),
        rep(3, "resources", Str),
        rep(4, "resourceNames", Str),
        rep(5, "nonResourceURLs", Str),
    ],
};
static AGGREGATION_RULE: Desc = Desc {
    name: "AggregationRule",
    fields: &[rep(1, "clusterRoleSelectors", Msg(&LABEL_SELECTOR))],
};
static BINDING: Desc = Desc {
    name: "RoleBinding",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "subjects", Msg(&SUBJECT)),
        f(3, "roleRef", Msg(&ROLE_REF)),
    ],
};
static SUBJECT: Desc = Desc {
    name: "Subject",
    fields: &[
        f(1, "kind", Str),
        f(2, "apiGroup", Str),
        f(3, "name", Str),
        f(4, "namespace", Str),
    ],
};
static ROLE_REF: Desc = Desc {
    name: "RoleRef",
    fields: &[f(1, "apiGroup", Str), f(2, "kind", Str), f(3, "name", Str)],
};

/// The message of a kind, by apiVersion and kind (`Role` and `ClusterRole` share one:
/// a Role never carries an aggregation rule).
// Reviews (`kubectl auth can-i` and `auth whoami` send them as protobuf) and the
// DeleteOptions typed Go clients (Helm) send with a delete.
static SELF_SUBJECT_ACCESS_REVIEW: Desc = Desc {
    name: "SelfSubjectAccessReview",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        f(3, "status", Skip),
    ],
};
static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Desc = Desc {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        f(1, "resourceAttributes", Msg(&RESOURCE_ATTRIBUTES)),
        f(2, "nonResourceAttributes", Msg(&NON_RESOURCE_ATTRIBUTES)),
    ],
};
static SUBJECT_ACCESS_REVIEW: Desc = Desc {
    name: "SubjectAccessReview",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&SUBJECT_ACCESS_REVIEW_SPEC)),
        f(3, "status", Skip),
    ],
};
static SUBJECT_ACCESS_REVIEW_SPEC: Desc = Desc {
    name: "SubjectAccessReviewSpec",
    fields: &[
        f(1, "resourceAttributes", Msg(&RESOURCE_ATTRIBUTES)),
        f(2, "nonResourceAttributes", Msg(&NON_RESOURCE_ATTRIBUTES)),
        f(3, "user", Str),
        rep(4, "groups", Str),
        // Extra attributes do not decide anything the simulator's RBAC checks.
        f(5, "extra", Skip),
        f(6, "uid", Str),
    ],
};
static RESOURCE_ATTRIBUTES: Desc = Desc {
    name: "ResourceAttributes",
    fields: &[
        f(1, "namespace", Str),
        f(2, "verb", Str),
        f(3, "group", Str),
        f(4, "version", Str),
        f(5, "resource", Str),
        f(6, "subresource", Str),
        f(7, "name", Str),
        f(8, "fieldSelector", Msg(&SELECTOR_ATTRIBUTES)),
        f(9, "labelSelector", Msg(&SELECTOR_ATTRIBUTES)),
    ],
};
static SELECTOR_ATTRIBUTES: Desc = Desc {
    name: "SelectorAttributes",
    fields: &[
        f(1, "rawSelector", Str),
        rep(2, "requirements", Msg(&SELECTOR_REQUIREMENT)),
    ],
};
static NON_RESOURCE_ATTRIBUTES: Desc = Desc {
    name: "NonResourceAttributes",
    fields: &[f(1, "path", Str), f(2, "verb", Str)],
};
static SELF_SUBJECT_REVIEW: Desc = Desc {
    name: "SelfSubjectReview",
    fields: &[f(1, "metadata", Msg(&OBJECT_META)), f(2, "status", Skip)],
};
static DELETE_OPTIONS: Desc = Desc {
    name: "DeleteOptions",
    fields: &[
        ptr(1, "gracePeriodSeconds", Int),
        f(2, "preconditions", Msg(&PRECONDITIONS)),
        ptr(3, "orphanDependents", Bool),
        f(4, "propagationPolicy", Str),
        rep(5, "dryRun", Str),
        ptr(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
    ],
};
static PRECONDITIONS: Desc = Desc {
    name: "Preconditions",
    fields: &[f(1, "uid", Str), f(2, "resourceVersion", Str)],
};

pub(super) fn kind_desc(api_version: &str, kind: &str) -> Option<&'static Desc> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => &CONFIG_MAP,
        ("v1", "Secret") => &SECRET,
        ("v1", "Namespace") => &NAMESPACE,
        ("v1", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("v1", "Service") => &SERVICE,
        ("v1", "Pod") => &POD,
        ("apps/v1", "Deployment") => &DEPLOYMENT,
        ("batch/v1", "Job") => &JOB,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => &ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => &BINDING,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => &SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "SubjectAccessReview") => &SUBJECT_ACCESS_REVIEW,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => &SELF_SUBJECT_REVIEW,
        // A client encodes DeleteOptions in the group version it talks to.
        (_, "DeleteOptions") => &DELETE_OPTIONS,
        _ => return None,
    })
}
