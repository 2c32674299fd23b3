#!/usr/bin/env python3
"""Writes Karmada's CRD tarball (crds.tar.gz, as each release publishes it) from the
chart's `_crds` directory of the Karmada module: entries under `crds/` (`bases/`,
`patches/`, `kustomization.yaml`), directories before their files, plain tar headers (no
pax global header) and gzip, which is what karmada-operator's strict unpacker accepts.

  crd_tarball.py SRC_CRDS_DIR OUT.tar.gz
"""
import gzip
import io
import os
import sys
import tarfile


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    if not os.path.isdir(os.path.join(src, "bases")):
        print(f"crd_tarball.py: {src} has no bases/ directory", file=sys.stderr)
        return 1
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        def add_dir(rel):
            info = tarfile.TarInfo(rel)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)

        add_dir("crds")
        for root, dirs, files in os.walk(src):
            dirs.sort()
            rel_root = os.path.relpath(root, src)
            base = "crds" if rel_root == "." else f"crds/{rel_root}"
            if rel_root != ".":
                add_dir(base)
            for name in sorted(files):
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                info = tarfile.TarInfo(f"{base}/{name}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    tmp = out + ".tmp"
    with open(tmp, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as g:
        g.write(buf.getvalue())
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
