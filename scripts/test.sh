#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test (unit, integration, and the
# client-conformance tests that drive kubectl and the Python client against the simulator).
# Ends with one line summing every test binary's results.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
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
