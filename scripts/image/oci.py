#!/usr/bin/env python3
"""Writes a container image as an OCI archive (an OCI image layout in a tar), without a
daemon: one gzip layer of the given files, a config and a manifest, named in index.json so
that `ctr images import`, `skopeo copy oci-archive:...` and `podman load` take it.

The output is reproducible: entries sorted, owners and times fixed (SOURCE_DATE_EPOCH, or
--epoch), gzip without a timestamp; the same inputs give the same digests.

  oci.py build --out IMG.tar --name REPO:TAG --entrypoint /bin/x [--cmd ARG]... \
      [--user UID:GID] [--label K=V]... [--env K=V]... [--workdir DIR] \
      [--file SRC:DEST[:MODE[:UID:GID]]]... [--dir DEST:MODE[:UID:GID]]... [--users]
      [--link DEST:TARGET]...
      [--gzip-level 1..9]
  oci.py inspect IMG.tar        prints {"name", "config", "manifest", "files"} as JSON
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"

# The conventional non-root user of minimal images (distroless uses the same ids).
PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnonroot:x:65532:\n"


class Usage(Exception):
    pass


def parse_owner(parts, what):
    if not parts:
        return 0, 0
    if len(parts) != 2:
        raise Usage(f"{what}: owner must be UID:GID")
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise Usage(f"{what}: owner must be numeric UID:GID")


def parse_mode(text, what):
    try:
        return int(text, 8)
    except ValueError:
        raise Usage(f"{what}: mode {text!r} is not octal")


def entries_from(args):
    """(path in image, kind, data or None, mode, uid, gid)"""
    out = {}

    def add_parents(path):
        parent = os.path.dirname(path)
        while parent and parent != "/" and parent not in out:
            out[parent] = ("dir", None, 0o755, 0, 0)
            parent = os.path.dirname(parent)

    for spec in args.file or []:
        parts = spec.split(":")
        if len(parts) < 2:
            raise Usage(f"--file {spec}: expected SRC:DEST[:MODE[:UID:GID]]")
        src, dest = parts[0], parts[1]
        if not dest.startswith("/"):
            raise Usage(f"--file {spec}: DEST must be absolute")
        try:
            with open(src, "rb") as f:  # follows symlinks: the image holds the file
                data = f.read()
            st_mode = os.stat(src).st_mode & 0o7777
        except OSError as e:
            raise Usage(f"--file {spec}: {e}")
        mode = parse_mode(parts[2], f"--file {spec}") if len(parts) > 2 and parts[2] else st_mode
        uid, gid = parse_owner(parts[3:], f"--file {spec}")
        out[dest] = ("file", data, mode, uid, gid)
        add_parents(dest)
    for spec in args.dir or []:
        parts = spec.split(":")
        if len(parts) < 2 or not parts[0].startswith("/"):
            raise Usage(f"--dir {spec}: expected /DEST:MODE[:UID:GID]")
        uid, gid = parse_owner(parts[2:], f"--dir {spec}")
        out[parts[0]] = ("dir", None, parse_mode(parts[1], f"--dir {spec}"), uid, gid)
        add_parents(parts[0])
    for spec in args.link or []:
        parts = spec.split(":")
        if len(parts) != 2 or not parts[0].startswith("/") or not parts[1]:
            raise Usage(f"--link {spec}: expected /DEST:TARGET")
        out[parts[0]] = ("link", parts[1], 0o777, 0, 0)
        add_parents(parts[0])
    if args.users:
        for path, text in (("/etc/passwd", PASSWD), ("/etc/group", GROUP)):
            out[path] = ("file", text.encode(), 0o644, 0, 0)
            add_parents(path)
        out.setdefault("/home/nonroot", ("dir", None, 0o700, 65532, 65532))
        add_parents("/home/nonroot")
    return out


def layer_tar(entries, epoch):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries):
            kind, data, mode, uid, gid = entries[path]
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mode, info.uid, info.gid, info.mtime = mode, uid, gid, epoch
            info.uname = info.gname = ""
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def gzip_bytes(data, level=9):
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=level, mtime=0) as g:
        g.write(data)
    return out.getvalue()


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def key_values(items, what):
    out = {}
    for item in items or []:
        if "=" not in item:
            raise Usage(f"{what} {item}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def build(args):
    if ":" not in args.name.rsplit("/", 1)[-1]:
        raise Usage(f"--name {args.name}: expected REPOSITORY:TAG")
    epoch = args.epoch if args.epoch is not None else int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    entries = entries_from(args)
    if args.entrypoint and args.entrypoint[0] not in entries:
        raise Usage(f"--entrypoint {args.entrypoint[0]}: not a file in the image")
    tar = layer_tar(entries, epoch)
    layer = gzip_bytes(tar, args.gzip_level)
    labels = key_values(args.label, "--label")
    env = ["PATH=/usr/local/bin:/usr/bin:/bin"] + [f"{k}={v}" for k, v in key_values(args.env, "--env").items()]
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": args.user,
            "Env": env,
            "Entrypoint": args.entrypoint,
            "Cmd": args.cmd or None,
            "WorkingDir": args.workdir,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [digest(tar)]},
        "history": [{"created": created, "created_by": "scripts/image/oci.py"}],
    }
    config["config"] = {k: v for k, v in config["config"].items() if v not in (None, "", {})}
    config_bytes = canonical(config)
    tag = args.name.rsplit(":", 1)[1]
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": digest(config_bytes), "size": len(config_bytes)},
        "layers": [{"mediaType": MEDIA_LAYER, "digest": digest(layer), "size": len(layer)}],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")},
    }
    manifest_bytes = canonical(manifest)
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [{
            "mediaType": MEDIA_MANIFEST,
            "digest": digest(manifest_bytes),
            "size": len(manifest_bytes),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                # containerd (`ctr images import`) names the image after this one...
                "io.containerd.image.name": args.name,
                # ...skopeo and podman after the OCI reference name.
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    }
    files = {
        "oci-layout": canonical({"imageLayoutVersion": "1.0.0"}),
        "index.json": canonical(index),
    }
    for blob in (config_bytes, manifest_bytes, layer):
        files["blobs/sha256/" + digest(blob).split(":", 1)[1]] = blob
    tmp = args.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as out:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            out.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, epoch
            out.addfile(info, io.BytesIO(files[name]))
    os.replace(tmp, args.out)
    print(json.dumps({
        "image": args.name,
        "archive": args.out,
        "manifest": digest(manifest_bytes),
        "compressed_bytes": len(layer),
        "uncompressed_bytes": len(tar),
        "archive_bytes": os.path.getsize(args.out),
    }))


def inspect(args):
    with tarfile.open(args.archive) as t:
        index = json.load(t.extractfile("index.json"))
        desc = index["manifests"][0]
        blob = lambda d: t.extractfile("blobs/sha256/" + d.split(":", 1)[1]).read()
        manifest = json.loads(blob(desc["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        layer = blob(manifest["layers"][0]["digest"])
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as l:
            files = {
                "/" + m.name: {"mode": oct(m.mode), "uid": m.uid, "gid": m.gid, "size": m.size,
                               "sha256": hashlib.sha256(l.extractfile(m).read()).hexdigest() if m.isfile() else None}
                for m in l.getmembers()
            }
    print(json.dumps({"name": desc.get("annotations", {}).get("io.containerd.image.name"),
                      "config": config, "manifest": manifest, "files": files}, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--name", required=True)
    b.add_argument("--entrypoint", action="append", required=True)
    b.add_argument("--cmd", action="append")
    b.add_argument("--user")
    b.add_argument("--label", action="append")
    b.add_argument("--env", action="append")
    b.add_argument("--workdir")
    b.add_argument("--file", action="append")
    b.add_argument("--dir", action="append")
    b.add_argument("--link", action="append", help="a symbolic link /DEST:TARGET")
    b.add_argument("--users", action="store_true", help="add /etc/passwd and /etc/group with root and nonroot (65532)")
    b.add_argument("--epoch", type=int)
    b.add_argument("--gzip-level", type=int, default=9, choices=range(1, 10),
                   help="1 is fast for large images that only travel on this machine")
    i = sub.add_parser("inspect")
    i.add_argument("archive")
    args = p.parse_args()
    try:
        build(args) if args.command == "build" else inspect(args)
    except Usage as e:
        print(f"oci.py: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
