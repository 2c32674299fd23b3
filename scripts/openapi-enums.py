#!/usr/bin/env python3
"""Regenerates sim/src/openapi/enums.json from a real kube-apiserver's OpenAPI v3 documents.

k8s-openapi (where the simulator's built-in schemas come from) drops the enum values of
built-in fields and the "Possible enum values" notes in their descriptions; this records
them, per definition and field, for the simulator to publish as kube-apiserver does.

Usage: scripts/openapi-enums.py https://127.0.0.1:6443 TOKEN
(the real fleet's host kube-apiserver, for example; run it after a Kubernetes upgrade).
"""

import json
import pathlib
import ssl
import sys
import urllib.request

# The group-versions whose kinds the simulator serves.
GROUP_VERSIONS = [
    "api/v1",
    "apis/apps/v1",
    "apis/batch/v1",
    "apis/coordination.k8s.io/v1",
    "apis/rbac.authorization.k8s.io/v1",
    "apis/authorization.k8s.io/v1",
    "apis/apiextensions.k8s.io/v1",
    "apis/apiregistration.k8s.io/v1",
    "apis/autoscaling/v1",
]
NOTE = "\n\nPossible enum values:"


def fetch(base, token, path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    # A development tool against a local test server with a self-signed certificate.
    ctx = ssl._create_unverified_context()
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        return json.load(resp)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    base, token = sys.argv[1].rstrip("/"), sys.argv[2]
    out = {}
    for gv in GROUP_VERSIONS:
        doc = fetch(base, token, "/openapi/v3/" + gv)
        for name, schema in doc["components"]["schemas"].items():
            for field, prop in schema.get("properties", {}).items():
                target = prop.get("items", prop)
                if "enum" not in target:
                    continue
                description = prop.get("description", "")
                note = description[description.find(NOTE):] if NOTE in description else ""
                entry = {"enum": target["enum"], "note": note}
                if target is not prop:
                    entry["items"] = True
                out.setdefault(name, {})[field] = entry
    path = pathlib.Path(__file__).resolve().parent.parent / "sim/src/openapi/enums.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{sum(len(v) for v in out.values())} enum fields in {len(out)} definitions -> {path}")


if __name__ == "__main__":
    main()
