#!/usr/bin/env bash
# Installs what the test suite drives besides cargo: kubectl and the Python Kubernetes
# client (in the project's own virtualenv, .venv), Chromium for the console, and what
# the cluster tier's node runs on (Debian's containerd, runc, CNI plugins, iptables,
# conntrack) plus skopeo to read images. Idempotent; safe to run every time.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kubectl >/dev/null 2>&1; then
  echo "installing kubectl (Debian package kubernetes-client)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kubernetes-client >/dev/null
fi
# awk reads all input: `head -1` would close the pipe early and pipefail would turn
# kubectl's SIGPIPE into a failed run.
kubectl version --client 2>/dev/null | awk 'NR == 1' || true

# The cluster tier: a kubelet-backed node (containerd 1.6 and runc from Debian; kubelet
# itself is built by scripts/real-fleet/build.sh), skopeo, which reads the image, and a
# static busybox for the node's workload image.
missing=()
for pair in containerd:containerd runc:runc iptables:iptables conntrack:conntrack skopeo:skopeo nsenter:util-linux; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
# A static busybox: the node's workload image for exec, logs and port-forward.
[ -x /bin/busybox ] || missing+=(busybox-static)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages, for the cluster tier)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "$(containerd --version | awk '{print $1, $3}'), $(runc --version | awk 'NR == 1')"

if [ ! -x .venv/bin/python ]; then
  echo "creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import kubernetes, grpc, grpc_reflection, grpc_health, kubernetes_validate" >/dev/null 2>&1; then
  echo "installing Python test packages into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
fi
.venv/bin/python -c "import kubernetes; print('python kubernetes client', kubernetes.__version__)"

# The console's browser tests: Debian's Chromium (Playwright never downloads a browser
# here) and the console's npm packages from its lockfile, in ui/node_modules (npm's cache
# stays in ~/.npm, outside the clone). Reinstalled only when package-lock.json changed.
if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium (Debian package)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "the console's tests need Node.js >= 20.19 with npm (e.g. the nodejs package)" >&2
  exit 1
fi
if ! cmp -s ui/package-lock.json ui/node_modules/.package-lock.json.installed; then
  echo "installing the console's npm packages (npm ci in ui/)"
  (cd ui && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  cp ui/package-lock.json ui/node_modules/.package-lock.json.installed
fi
echo "node $(node --version), $(/usr/bin/chromium --version 2>/dev/null | awk 'NR == 1')"
