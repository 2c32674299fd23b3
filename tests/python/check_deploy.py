"""Checks deploy/: every manifest is valid against the Kubernetes schemas (offline, with
kubernetes-validate), the Deployment is what an SRE expects, and the RBAC rules allow
exactly the host API calls Kairship made (an audit recorded by the simulated host).

Usage: check_deploy.py DEPLOY_DIR AUDIT_JSON
"""
import glob
import json
import os
import sys

import kubernetes_validate
import yaml

checks = 0


def check(cond, what):
    global checks
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)
    checks += 1


def main(deploy_dir, audit_path):
    docs = []
    # The manifests (kairship.yaml is rendered from the chart) and the CRDs; the chart's
    # own templates are checked through that rendering.
    paths = glob.glob(os.path.join(deploy_dir, "*.yaml")) + glob.glob(os.path.join(deploy_dir, "crds", "*.yaml"))
    for path in sorted(paths):
        for doc in yaml.safe_load_all(open(path)):
            if doc:
                try:
                    kubernetes_validate.validate(doc, "1.31", strict=True)
                except kubernetes_validate.ValidationError as e:
                    check(False, f"{path}: {doc.get('kind')} {doc['metadata'].get('name')}: {e.message}")
                # instance-rbac.yaml is applied to each Karmada instance, not the host:
                # validated here, but not part of the host's least-privilege check.
                if os.path.basename(path) != "instance-rbac.yaml":
                    docs.append(doc)
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for kind in ["CustomResourceDefinition", "ServiceAccount", "ClusterRole", "Role", "Deployment", "PodDisruptionBudget", "Service"]:
        check(kind in by_kind, f"deploy/ has a {kind}")

    dep = by_kind["Deployment"][0]
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    check(dep["spec"]["replicas"] == 3, "3 replicas")
    check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness on /readyz")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness on /healthz")
    check("requests" in c["resources"] and "limits" in c["resources"], "requests and limits")
    check("--leader-elect=true" in c["args"], "leader election on")
    check(spec["serviceAccountName"] == "kairship", "runs as the kairship ServiceAccount")
    check(spec["securityContext"]["runAsUser"] == 65532 and spec["securityContext"]["runAsNonRoot"], "runs as 65532, never root")
    check(c["securityContext"]["readOnlyRootFilesystem"], "read-only root filesystem")
    check(dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, "a rolling update never removes a replica first")
    check(any(a.startswith("--shutdown-delay-secs=") for a in c["args"]), "a shutdown delay while endpoints converge")
    check(by_kind["PodDisruptionBudget"][0]["spec"]["minAvailable"] == 2, "at most one replica disrupted at a time")

    rules = []
    for role in by_kind["ClusterRole"]:
        rules += [(None, r) for r in role["rules"]]
    for role in by_kind["Role"]:
        rules += [(role["metadata"]["namespace"], r) for r in role["rules"]]

    def allows(ns, rule, call):
        if ns is not None and call.get("namespace") != ns:
            return False
        if call["group"] not in rule["apiGroups"] or call["resource"] not in rule["resources"] or call["verb"] not in rule["verbs"]:
            return False
        names = rule.get("resourceNames")
        return not names or call.get("name") in names

    calls = json.load(open(audit_path))
    used = set()
    for call in calls:
        matching = [(i, ns, r) for i, (ns, r) in enumerate(rules) if allows(ns, r, call)]
        check(matching, f"RBAC does not allow {call['verb']} {call['group'] or 'core'}/{call['resource']} (namespace {call.get('namespace')}, name {call.get('name')})")
        for i, _, r in matching:
            used.add((i, call["group"], call["resource"], call["verb"]))
    # Least privilege: every verb granted is one Kairship used.
    for i, (ns, r) in enumerate(rules):
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    check((i, g, res, v) in used, f"RBAC grants {v} on {g or 'core'}/{res} but Kairship never used it")
    print(f"deploy check: all checks passed ({checks}, {len(calls)} distinct host calls)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
