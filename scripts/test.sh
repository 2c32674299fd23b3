#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test (unit, integration, and the
# client-conformance tests that drive kubectl and the Python client against the simulator,
# and the real-fleet tier against upstream kube-apiserver and Karmada built from Go modules).
# Ends with one line summing every test binary's results.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
# The real-fleet tier's upstream binaries (kube-apiserver, etcd, Karmada), cached outside
# the clone: minutes on a cold cache, seconds after.
bash scripts/real-fleet/build.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
