#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test (unit, integration, and the
# client-conformance tests that drive kubectl and the Python client against the simulator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
