#!/usr/bin/env bash
# The whole test suite, from a fresh clone: formatting, lints, unit and integration tests.
# Installs what the tests need on first use: the all-MiniLM-L6-v2 model for the local-embedder
# tests (once, outside the clone; see docs/embeddings.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

# The local-embedder tests need all-MiniLM-L6-v2: installed once, outside the clone.
if [ -z "${RAGTRAIL_TEST_MODEL_DIR:-}" ]; then
  RAGTRAIL_TEST_MODEL_DIR=$(bash scripts/install_test_model.sh)
  export RAGTRAIL_TEST_MODEL_DIR
fi
echo "== model for the local-embedder tests: $RAGTRAIL_TEST_MODEL_DIR"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --all-targets --locked
