#!/usr/bin/env bash
# Installs what the test suite drives besides cargo: kubectl and the Python Kubernetes
# client (in the project's own virtualenv, .venv). Idempotent; safe to run every time.
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

if [ ! -x .venv/bin/python ]; then
  echo "creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import kubernetes, grpc, grpc_reflection, grpc_health, kubernetes_validate" >/dev/null 2>&1; then
  echo "installing Python test packages into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
fi
.venv/bin/python -c "import kubernetes; print('python kubernetes client', kubernetes.__version__)"
