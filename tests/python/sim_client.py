"""Drives a simulated karmada-apiserver with the official Python client.

Usage: sim_client.py KUBECONFIG. Exits non-zero with a message on the first failed check.
"""
import sys
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

checks = 0


def check(cond, what):
    global checks
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)
    checks += 1


def main(kubeconfig):
    api_client = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    ns = "default"

    # ConfigMap CRUD
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-cm", labels={"app": "py"}), data={"k": "v"})
    created = core.create_namespaced_config_map(ns, cm)
    check(created.metadata.resource_version, "create returns a resourceVersion")
    got = core.read_namespaced_config_map("py-cm", ns)
    check(got.data == {"k": "v"}, "read returns the data")
    listed = core.list_namespaced_config_map(ns, label_selector="app=py")
    check([i.metadata.name for i in listed.items] == ["py-cm"], "list by label selector")
    got.data["k"] = "v2"
    replaced = core.replace_namespaced_config_map("py-cm", ns, got)
    check(replaced.data["k"] == "v2", "replace updates the data")
    stale = got  # still carries the old resourceVersion
    try:
        core.replace_namespaced_config_map("py-cm", ns, stale)
        check(False, "stale replace must conflict")
    except ApiException as e:
        check(e.status == 409, f"stale replace answers 409, got {e.status}")
    patched = core.patch_namespaced_config_map("py-cm", ns, {"metadata": {"labels": {"extra": "1"}}})
    check(patched.metadata.labels.get("extra") == "1", "patch adds a label")
    try:
        core.create_namespaced_config_map(ns, cm)
        check(False, "duplicate create must fail")
    except ApiException as e:
        check(e.status == 409 and "AlreadyExists" in e.body, "duplicate create answers 409 AlreadyExists")

    # Deployment through the apps API
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="py-web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": "py-web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "py-web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx")]),
            ),
        ),
    )
    apps.create_namespaced_deployment(ns, dep)
    d = apps.read_namespaced_deployment("py-web", ns)
    check(d.spec.replicas == 2 and d.metadata.generation == 1, "deployment round-trips")

    # Karmada custom objects
    pp = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "py-pp"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "py-web"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
        },
    }
    custom.create_namespaced_custom_object("policy.karmada.io", "v1alpha1", ns, "propagationpolicies", pp)
    pps = custom.list_namespaced_custom_object("policy.karmada.io", "v1alpha1", ns, "propagationpolicies")
    check("py-pp" in [i["metadata"]["name"] for i in pps["items"]], "custom object list")
    clusters = custom.list_cluster_custom_object("cluster.karmada.io", "v1alpha1", "clusters")
    check(len(clusters["items"]) == 2, "two member clusters listed")
    custom.delete_namespaced_custom_object("policy.karmada.io", "v1alpha1", ns, "propagationpolicies", "py-pp")
    # Real Karmada holds a policy with its finalizer until its controller lets go.
    deadline = time.time() + 20
    while True:
        try:
            custom.get_namespaced_custom_object("policy.karmada.io", "v1alpha1", ns, "propagationpolicies", "py-pp")
            check(time.time() < deadline, "deleted custom object must be gone")
            time.sleep(0.2)
        except ApiException as e:
            check(e.status == 404, "deleted custom object answers 404")
            break

    # watch.Watch().stream: events for objects created while the stream is open
    rv = core.list_namespaced_config_map(ns).metadata.resource_version

    def writer():
        time.sleep(0.5)
        core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-watched")))
        core.delete_namespaced_config_map("py-watched", ns)

    threading.Thread(target=writer, daemon=True).start()
    seen = []
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=15):
        if ev["object"].metadata.name == "py-watched":
            seen.append(ev["type"])
        if seen == ["ADDED", "DELETED"]:
            w.stop()
    check(seen == ["ADDED", "DELETED"], f"watch sees ADDED then DELETED, saw {seen}")

    core.delete_namespaced_config_map("py-cm", ns)
    apps.delete_namespaced_deployment("py-web", ns)
    check(core.list_namespaced_config_map(ns, label_selector="app=py").items == [], "delete removes the object")
    print(f"python client: all checks passed ({checks})")


if __name__ == "__main__":
    main(sys.argv[1])
