#!/usr/bin/env bash
# Builds Kairship's container image without a daemon: the production binary (cargo's
# `image` profile, --no-default-features: no simulator, real-fleet launcher or chaos
# harness) with exactly the shared libraries it loads (glibc's loader, libc, libm,
# libgcc_s, as ldd lists them), the CA bundle, and a non-root user (65532), written by
# scripts/image/oci.py as an OCI archive that `ctr images import`, `skopeo` and
# `podman load` take. The Containerfile builds the same image with a builder.
#
#   IMAGE=ghcr.io/kairship/kairship TAG=<version> OUT=target/image/kairship-<tag>.oci.tar
#
# Prints the archive's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
IMAGE=${IMAGE:-ghcr.io/kairship/kairship}
TAG=${TAG:-$VERSION}
OUT=${OUT:-target/image/kairship-$TAG.oci.tar}
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# Reproducible: the same commit gives the same layer digests.
EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

say() { printf 'image: %s\n' "$*" >&2; }
t0=$(date +%s)
say "building the production binary (cargo build --profile image --no-default-features)"
cargo build --profile image --no-default-features --locked --bin kairship
BIN=target/image/kairship

files=(--file "$BIN:/usr/local/bin/kairship:0755")
# The dynamic loader (ldd's line without "=>") and each library it resolves.
while read -r lib; do
  files+=(--file "$lib:$lib:0755")
done < <(ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  # For an OIDC provider's keys behind a public CA.
  files+=(--file /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644)
else
  say "no /etc/ssl/certs/ca-certificates.crt (Debian's ca-certificates): the image will carry no CA bundle"
fi

mkdir -p "$(dirname "$OUT")"
python3 scripts/image/oci.py build --out "$OUT" --name "$IMAGE:$TAG" \
  --entrypoint /usr/local/bin/kairship --user 65532:65532 --users --dir /tmp:1777 \
  --label org.opencontainers.image.title=kairship \
  --label "org.opencontainers.image.description=The management plane for fleets of Karmada instances" \
  --label "org.opencontainers.image.version=$VERSION" \
  --label org.opencontainers.image.source=https://github.com/kairship/kairship \
  --label "org.opencontainers.image.revision=$REVISION" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --epoch "$EPOCH" "${files[@]}" >"$OUT.json"
size=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f MB compressed, %.1f MB unpacked" % (d["compressed_bytes"]/1e6, d["uncompressed_bytes"]/1e6))' "$OUT.json")
say "$IMAGE:$TAG: $size, binary $(( $(stat -c %s "$BIN") / 1000000 )) MB ($(( $(date +%s) - t0 ))s)"
echo "$OUT"
