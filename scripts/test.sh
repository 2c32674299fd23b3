#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test (unit, integration, and the
# client-conformance tests that drive kubectl and the Python client against the simulator,
# the real-fleet tier against upstream kube-apiserver and Karmada built from Go modules, and
# the cluster tier: Kairship's image and chart on a kubelet-backed node).
# Ends with one line summing every test binary's results.
set -euo pipefail
cd "$(dirname "$0")/.."
# Everything the tiers need is built below; a tier that finds something missing fails
# (unless KAIRSHIP_SKIP_TIERS names it, which this script never sets).
# Packages (mostly downloads) install while the production image compiles (mostly CPU):
# minutes saved on a fresh machine. Its output follows the image build's.
deps_log=$(mktemp)
bash scripts/install-test-deps.sh >"$deps_log" 2>&1 &
deps=$!
trap 'pkill -P "$deps" 2>/dev/null; kill "$deps" 2>/dev/null; rm -f "$deps_log"' EXIT
# The production image the cluster tier installs with the chart (a release build:
# minutes cold, seconds warm).
bash scripts/image/build.sh
deps_status=0
wait "$deps" || deps_status=$?
cat "$deps_log"
if [ "$deps_status" -ne 0 ]; then
  echo "scripts/install-test-deps.sh failed (exit $deps_status)" >&2
  exit "$deps_status"
fi
# The real-fleet tier's upstream binaries (kube-apiserver, etcd, Karmada), cached outside
# the clone: minutes on a cold cache, seconds after. After the packages: the busybox
# image is made from Debian's busybox-static.
bash scripts/real-fleet/build.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The production build (the image's) leaves the test doubles out: lint it as built.
cargo clippy -p kairship --no-default-features --lib --bins --locked -- -D warnings
log=$(mktemp)
trap 'rm -f "$log" "$deps_log"' EXIT
set +e
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
