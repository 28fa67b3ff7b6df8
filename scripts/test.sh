#!/usr/bin/env bash
# The whole test suite, from a fresh clone: formatting, lints, unit and integration tests.
# Installs what the tests need on first use (nothing yet beyond the Rust toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --all-targets --locked
