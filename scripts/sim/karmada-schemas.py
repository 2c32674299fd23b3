#!/usr/bin/env python3
"""Writes sim/src/openapi/karmada_schemas.json: the openAPIV3Schema of every served version
of the Karmada CRDs the simulator serves, taken from Karmada's own CRDs (the module's
charts/karmada/_crds/bases, which scripts/real-fleet/build.sh copies into its cache).

Run it after changing the Karmada version the real fleet builds; the real tier's
differential test (tests/real/differential/karmada.rs) fails while the two disagree.

    python3 scripts/sim/karmada-schemas.py [CRD_DIR]
"""
import json
import pathlib
import sys

import yaml

# The CRDs the simulator serves on a Karmada instance (sim/src/resources.rs KARMADA_CRDS).
SERVED = [
    "policy.karmada.io_propagationpolicies",
    "policy.karmada.io_clusterpropagationpolicies",
    "policy.karmada.io_clustertaintpolicies",
    "policy.karmada.io_overridepolicies",
    "policy.karmada.io_clusteroverridepolicies",
    "work.karmada.io_resourcebindings",
    "work.karmada.io_clusterresourcebindings",
    "work.karmada.io_works",
]


def default_dir() -> pathlib.Path:
    cache = pathlib.Path.home() / ".cache" / "kairship" / "real"
    found = sorted(cache.glob("*-karmada-*/karmada-crds"))
    if not found:
        sys.exit(f"no Karmada CRDs under {cache}: run scripts/real-fleet/build.sh or name the directory")
    return found[-1]


def main() -> None:
    crd_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default_dir()
    out = {}
    for name in SERVED:
        path = crd_dir / f"{name}.yaml"
        if not path.exists():
            sys.exit(f"{path}: missing (is {crd_dir} a Karmada CRD directory?)")
        crd = yaml.safe_load(path.read_text())
        versions = {}
        for v in crd["spec"]["versions"]:
            if v.get("served", True):
                versions[v["name"]] = v["schema"]["openAPIV3Schema"]
        out[crd["metadata"]["name"]] = versions
    target = pathlib.Path(__file__).resolve().parents[2] / "sim/src/openapi/karmada_schemas.json"
    # One line per CRD version keeps diffs between Karmada releases readable per kind.
    lines = []
    for crd, versions in sorted(out.items()):
        for version, schema in sorted(versions.items()):
            key = json.dumps(f"{crd}/{version}")
            lines.append(f"{key}: {json.dumps(schema, sort_keys=True, separators=(',', ':'))}")
    target.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{target}: {len(lines)} schemas from {crd_dir}")


if __name__ == "__main__":
    main()
