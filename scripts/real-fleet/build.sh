#!/usr/bin/env bash
# Builds the upstream control planes the real-fleet tier runs as plain processes:
# kube-apiserver and kube-controller-manager (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3) and Karmada's
# aggregated-apiserver, controller-manager and scheduler (github.com/karmada-io/karmada),
# at pinned versions, from their Go modules, into a cache outside the repository; and what
# the cluster tier's kubelet-backed node needs besides Debian's containerd and runc:
# kubelet, kube-proxy and kube-scheduler (k8s.io/kubernetes), CoreDNS, Helm, and the pause
# and CoreDNS images (OCI archives written by scripts/image/oci.py, no daemon); and for the
# identity tests karmadactl and Dex; promtool for the chart's alert-rule tests and Prometheus for the rollout's alert halt; and for managed instances karmada-operator, the
# previous Karmada minor, both releases' CRD tarballs and images of every component.
# Idempotent: a binary already built at these versions is kept. Prints the bin directory
# on its last line.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.35.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.7}
# v1.18.2 is the newest Karmada release the Go module proxy serves here; its go.mod
# builds against k8s.io/* v0.35.3, hence the kube-apiserver above.
KARMADA_VERSION=${KARMADA_VERSION:-v1.18.2}
# The previous minor (its newest patch the module proxy serves here): managed instances
# are upgraded from it to the above.
KARMADA_PREVIOUS=${KARMADA_PREVIOUS:-v1.17.1}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.7}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# Dex's module path lacks its /v2 suffix, so the module proxy serves its releases only as
# pseudo-versions; this is its latest release's.
DEX_VERSION=${DEX_VERSION:-v0.0.0-20260806151424-ab64ed778070}
# Prometheus's module is versioned v0.<minor*100+...>: v0.316.0 is Prometheus 3.16.0.
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}

# The first Clusterpedia release whose PediaCluster reads credentials from Secrets
# (authenticationFrom); only its CRDs are used (see below).
CLUSTERPEDIA_VERSION=${CLUSTERPEDIA_VERSION:-v0.9.1}

CACHE=${KAIRSHIP_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kairship/real}
ROOT="$CACHE/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-karmada-$KARMADA_VERSION"
BIN="$ROOT/bin"
mkdir -p "$BIN" "$ROOT/src"

if ! command -v go >/dev/null 2>&1; then
  echo "real-fleet: Go is not installed (needed to build kube-apiserver, etcd and Karmada from" >&2
  echo "their Go modules); install Go 1.25 or newer and run again" >&2
  exit 2
fi
export GOFLAGS="${GOFLAGS:--mod=mod} -trimpath"
export CGO_ENABLED=0
# Two cores: one package compiled at a time per binary keeps the machine usable.
PAR=${REAL_FLEET_GO_P:-2}

step() { printf 'real-fleet: %s\n' "$*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

# A module of ours that requires the upstream module and builds one of its commands.
# NAME may have a directory (v1.17.5/karmada-scheduler): the binary goes there under BIN.
build() { # name module version package ldflags [replace lines...]
  local name=$1 module=$2 version=$3 pkg=$4 ldx=$5; shift 5
  if [ -x "$BIN/$name" ]; then step "$name: cached"; return; fi
  local dir="$ROOT/src/$name" t0; t0=$(date +%s)
  mkdir -p "$dir" "$(dirname "$BIN/$name")"
  {
    echo "module kairship.local/realfleet/${name//\//-}"
    echo "go 1.25"
    echo "require $module $version"
    for r in "$@"; do echo "replace $r"; done
  } > "$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" > "$dir/tools.go"
  step "$name: downloading $module@$version"
  (cd "$dir" && go mod tidy >"$dir/tidy.log" 2>&1) || { cat "$dir/tidy.log" >&2; exit 1; }
  step "$name: compiling $pkg (several minutes on a cold cache)"
  (cd "$dir" && go build -p "$PAR" ${BUILD_TAGS:+-tags "$BUILD_TAGS"} -ldflags="-s -w $ldx" -o "$BIN/$name.tmp" "$pkg" >"$dir/build.log" 2>&1) \
    || { cat "$dir/build.log" >&2; exit 1; }
  mv "$BIN/$name.tmp" "$BIN/$name"
  step "$name: built in $(elapsed "$t0")"
}

# A command of ours (scripts/real-fleet/NAME/main.go) over an upstream module.
build_main() { # name module version ldflags
  local name=$1 module=$2 version=$3 ldx=$4
  if [ -x "$BIN/$name" ]; then step "$name: cached"; return; fi
  local d="$ROOT/src/$name-main" t0; t0=$(date +%s)
  mkdir -p "$d"
  cp "$(dirname "$0")/$name/main.go" "$d/main.go"
  printf 'module kairship.local/realfleet/%s\ngo 1.25\nrequire %s %s\n' "$name" "$module" "$version" > "$d/go.mod"
  step "$name: downloading $module@$version and compiling $name/main.go"
  (cd "$d" && go mod tidy >tidy.log 2>&1 && go build -p "$PAR" -ldflags="-s -w $ldx" -o "$BIN/$name.tmp" . >build.log 2>&1) \
    || { cat "$d"/*.log >&2; exit 1; }
  mv "$BIN/$name.tmp" "$BIN/$name"; step "$name: built in $(elapsed "$t0")"
}

# k8s.io/kubernetes requires its staging modules at v0.0.0; map each to its published
# v0.<minor>.<patch>, read from the module's own go.mod.
staging_replaces() {
  local v0="v0.${KUBE_VERSION#v1.}" mod="$ROOT/src/kubernetes.mod"
  if [ ! -s "$mod" ]; then
    (cd "$ROOT/src" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" >dl.json)
    cp "$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$ROOT/src/dl.json")" "$mod"
  fi
  awk -v v="$v0" '/=> \.\/staging\/src\// { print $1 " => " $1 " " v }' "$mod"
}

t_all=$(date +%s)
mapfile -t KREPL < <(staging_replaces)
# Stamp the version `/version` reports (a module build has no git metadata).
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
KV="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
build kube-apiserver k8s.io/kubernetes "$KUBE_VERSION" k8s.io/kubernetes/cmd/kube-apiserver "$KV" "${KREPL[@]}"
# Karmada runs one too: without its clusterrole-aggregation controller the default
# view/edit/admin roles stay empty (karmada-apiserver has no other aggregator).
build kube-controller-manager k8s.io/kubernetes "$KUBE_VERSION" k8s.io/kubernetes/cmd/kube-controller-manager "$KV" "${KREPL[@]}"
# The cluster tier's node and the host's scheduler.
for c in kubelet kube-proxy kube-scheduler; do
  build "$c" k8s.io/kubernetes "$KUBE_VERSION" "k8s.io/kubernetes/cmd/$c" "$KV" "${KREPL[@]}"
done
# A main of ours with only the plugins the cluster tier's Corefile uses (coredns/main.go).
build_main coredns github.com/coredns/coredns "$COREDNS_VERSION" \
  "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
# As Helm's Makefile stamps it: the Kubernetes version `helm template` and `lint` assume
# (its client-go v0.37 is Kubernetes 1.37; unstamped, Helm assumes 1.20).
HK="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
HK="$HK -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37"
build helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION $HK"
if [ ! -x "$BIN/etcd" ]; then
  # etcd's command lives in its root module, whose replace directives point inside its own
  # repository; the server module exports the same entry point.
  d="$ROOT/src/etcd"; mkdir -p "$d"
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > "$d/main.go"
  printf 'module kairship.local/realfleet/etcd\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$d/go.mod"
  t0=$(date +%s); step "etcd: downloading and compiling go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  (cd "$d" && go mod tidy >tidy.log 2>&1 && go build -p "$PAR" -ldflags="-s -w" -o "$BIN/etcd.tmp" . >build.log 2>&1) \
    || { cat "$d"/*.log >&2; exit 1; }
  mv "$BIN/etcd.tmp" "$BIN/etcd"; step "etcd: built in $(elapsed "$t0")"
else
  step "etcd: cached"
fi
# karmada-agent runs in a Pull mode member (the cluster tier's node), at this release only.
for c in aggregated-apiserver controller-manager scheduler webhook metrics-adapter agent; do
  build "karmada-$c" github.com/karmada-io/karmada "$KARMADA_VERSION" "github.com/karmada-io/karmada/cmd/$c" \
    "-X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION"
done
# karmada-operator, which installs managed instances as pods; stamped with its version, so
# its defaults (image tags, the CRD tarball's release) are this release's.
build karmada-operator github.com/karmada-io/karmada "$KARMADA_VERSION" github.com/karmada-io/karmada/operator/cmd/operator \
  "-X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION"
# The previous minor's components, for upgrading a managed instance from it (its own
# k8s.io/* versions come with its go.mod).
for c in aggregated-apiserver controller-manager scheduler webhook metrics-adapter; do
  build "$KARMADA_PREVIOUS/karmada-$c" github.com/karmada-io/karmada "$KARMADA_PREVIOUS" "github.com/karmada-io/karmada/cmd/$c" \
    "-X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_PREVIOUS"
done
# The client users drive Karmada with (the identity tests run it through Kairship's proxy).
build karmadactl github.com/karmada-io/karmada "$KARMADA_VERSION" github.com/karmada-io/karmada/cmd/karmadactl \
  "-X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION"
# `promtool test rules` runs the chart's alert rules against series Kairship exports. It
# needs no service discovery: without the SD plugins (Prometheus's own build tag) it
# compiles in about a third of the time.
BUILD_TAGS=remove_all_sd build promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool ""
# Prometheus itself, for the rollout test that halts on a firing alert: it scrapes a
# Kairship, evaluates a rule and answers /api/v1/alerts. Same tag, same packages as promtool
# for the most part, so the build cache above makes it short.
BUILD_TAGS=remove_all_sd build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/prometheus ""
# A real OIDC provider for the identity tests: Dex's server as a library under a small
# command of ours (dex/main.go), since Dex's own command needs its api/v2 module at the same
# commit, which the module proxy does not serve.
build_main dex github.com/dexidp/dex "$DEX_VERSION" ""
# Karmada's CRDs at the same version, for installing into each karmada-apiserver.
if [ ! -d "$ROOT/karmada-crds" ]; then
  src=$(cd "$ROOT/src/karmada-scheduler" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
  mkdir -p "$ROOT/karmada-crds"
  find "$src/charts/karmada/_crds/bases" -name '*.yaml' -exec cp {} "$ROOT/karmada-crds/" \;
  chmod -R u+w "$ROOT/karmada-crds"
fi
# Clusterpedia's CRDs (PediaCluster, ClusterSyncResources) from its module, for the
# registration tests. Its binaries are not built: the module proxy here refuses v0.8.x (403)
# and v0.9.x's archive drops its nested API module (staging/), while the only published
# github.com/clusterpedia-io/api (v0.8) lacks spec.authenticationFrom, which v0.9 needs
# (cluster.Spec.AuthenticationFrom undefined, ListOptions.InjectEvents undefined).
if [ ! -s "$ROOT/clusterpedia-crds/cluster.clusterpedia.io_pediaclusters.yaml" ]; then
  d="$ROOT/src/clusterpedia"; mkdir -p "$d"
  (cd "$d" && go mod download -json "github.com/clusterpedia-io/clusterpedia@$CLUSTERPEDIA_VERSION" >dl.json) \
    || { cat "$d/dl.json" >&2; exit 1; }
  src=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' "$d/dl.json")
  mkdir -p "$ROOT/clusterpedia-crds"
  cp "$src"/kustomize/crds/cluster.clusterpedia.io_*.yaml "$ROOT/clusterpedia-crds/"
  chmod -R u+w "$ROOT/clusterpedia-crds"
  step "Clusterpedia $CLUSTERPEDIA_VERSION CRDs copied"
fi
# Images the node imports into containerd (no registry is reachable): the pod sandbox's
# pause program (ours: a static C program that waits for a signal and reaps children) and
# CoreDNS. Named kairship.local/... so nobody mistakes them for the upstream images.
IMAGES="$ROOT/images"
mkdir -p "$IMAGES"
OCI="$(cd "$(dirname "$0")/.." && pwd)/image/oci.py"
if [ ! -s "$IMAGES/pause.tar" ]; then
  gcc -static -Os -s -o "$ROOT/src/pause" "$(dirname "$0")/pause.c"
  python3 "$OCI" build --out "$IMAGES/pause.tar" --name kairship.local/pause:1.0 \
    --entrypoint /pause --file "$ROOT/src/pause:/pause:0755" --user 65535:65535 >/dev/null
  step "pause image written"
fi
if [ ! -s "$IMAGES/coredns.tar" ]; then
  python3 "$OCI" build --out "$IMAGES/coredns.tar" --name "kairship.local/coredns:$COREDNS_VERSION" \
    --entrypoint /coredns --file "$BIN/coredns:/coredns:0755" --users --user 65532:65532 >/dev/null
  step "CoreDNS image written"
fi
# A workload to exec into, read the logs of and port-forward to: Debian's static busybox
# (scripts/install-test-deps.sh installs it) with its applets linked, as the busybox image.
if [ ! -s "$IMAGES/busybox.tar" ] && [ -x /bin/busybox ]; then
  links=()
  for applet in sh cat echo hostname httpd ls sleep wget env; do links+=(--link "/bin/$applet:busybox"); done
  python3 "$OCI" build --out "$IMAGES/busybox.tar" --name kairship.local/busybox:1.35 \
    --entrypoint /bin/sh --file /bin/busybox:/bin/busybox:0755 "${links[@]}" \
    --users --user 65532:65532 >/dev/null
  step "busybox image written"
fi
# What karmada-operator needs on an air-gapped node: its own manifests and CRD (from its
# module), each release's CRD tarball in the layout the operator unpacks, and images of
# every component it deploys, at the paths and entrypoints the operator's pod templates
# name (kube-apiserver and kube-controller-manager on PATH, /usr/local/bin/etcd,
# /bin/karmada-*), all under one registry name, kairship.local/karmada.
OPERATOR="$ROOT/karmada-operator"
if [ ! -s "$OPERATOR/crds/operator.karmada.io_karmadas.yaml" ]; then
  src=$(cd "$ROOT/src/karmada-operator" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
  mkdir -p "$OPERATOR"
  cp -r "$src/operator/config/deploy" "$src/operator/config/crds" "$OPERATOR/"
  chmod -R u+w "$OPERATOR"
fi
CRD_TARBALLS="$ROOT/crd-tarballs"
for v in "$KARMADA_VERSION" "$KARMADA_PREVIOUS"; do
  if [ ! -s "$CRD_TARBALLS/$v/crds.tar.gz" ]; then
    probe="$ROOT/src/karmada-scheduler"; [ "$v" = "$KARMADA_PREVIOUS" ] && probe="$ROOT/src/$KARMADA_PREVIOUS/karmada-scheduler"
    src=$(cd "$probe" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
    mkdir -p "$CRD_TARBALLS/$v"
    python3 "$(dirname "$0")/crd_tarball.py" "$src/charts/karmada/_crds" "$CRD_TARBALLS/$v/crds.tar.gz"
    step "Karmada $v CRD tarball written"
  fi
done
REG=kairship.local/karmada
image() { # file name:tag binary path-in-image
  local out="$IMAGES/karmada/$1.tar"
  if [ -s "$out" ]; then return; fi
  mkdir -p "$IMAGES/karmada"
  python3 "$OCI" build --out "$out.tmp" --name "$REG/$2" --entrypoint "$4" \
    --file "$3:$4:0755" --dir /tmp:1777 --dir /var/lib/karmada:0755 --users --gzip-level 1 >/dev/null
  mv "$out.tmp" "$out"
  step "image $REG/$2 written"
}
image "kube-apiserver-$KUBE_VERSION" "kube-apiserver:$KUBE_VERSION" "$BIN/kube-apiserver" /usr/local/bin/kube-apiserver
image "kube-controller-manager-$KUBE_VERSION" "kube-controller-manager:$KUBE_VERSION" "$BIN/kube-controller-manager" /usr/local/bin/kube-controller-manager
image "etcd-${ETCD_VERSION#v}" "etcd:${ETCD_VERSION#v}" "$BIN/etcd" /usr/local/bin/etcd
image "karmada-operator-$KARMADA_VERSION" "karmada-operator:$KARMADA_VERSION" "$BIN/karmada-operator" /bin/karmada-operator
for c in aggregated-apiserver controller-manager scheduler webhook metrics-adapter; do
  image "karmada-$c-$KARMADA_VERSION" "karmada-$c:$KARMADA_VERSION" "$BIN/karmada-$c" "/bin/karmada-$c"
  image "karmada-$c-$KARMADA_PREVIOUS" "karmada-$c:$KARMADA_PREVIOUS" "$BIN/$KARMADA_PREVIOUS/karmada-$c" "/bin/karmada-$c"
done
image "karmada-agent-$KARMADA_VERSION" "karmada-agent:$KARMADA_VERSION" "$BIN/karmada-agent" /bin/karmada-agent
step "all binaries ready in $(elapsed "$t_all")"
echo "$BIN"
