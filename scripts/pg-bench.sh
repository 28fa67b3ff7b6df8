#!/usr/bin/env bash
# PostgreSQL benchmark (never part of the test suite): ingest rows/s, vector leg HNSW vs exact
# with recall, fused searchDocs latency. Prints Markdown to paste into BENCHMARKS.md.
#   scripts/pg-bench.sh [ROWS] [QUERIES]     synthetic corpus, hashing embedder; defaults 100000 200
#   scripts/pg-bench.sh --beir DIR [OPTIONS] a real corpus; --embedder local --embed-model-dir DIR
#                                            --vector-cache FILE for semantic vectors (all the
#                                            options: the header of examples/pg_bench/main.rs)
# Starts a throwaway server with durable settings (fsync on) unless DATABASE_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m); $(date -u +%F)"
if [ -z "${DATABASE_URL:-}" ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-pg-bench.XXXXXX")
  trap 'bash scripts/pg-test.sh stop "$dir" || true' EXIT
  DATABASE_URL=$(RAGTRAIL_PG_DURABLE=1 bash scripts/pg-test.sh start "$dir" | sed -n 's/^DATABASE_URL=//p' | tail -1)
  export DATABASE_URL
fi
cargo build --release -p ragtrail --example pg_bench
"$CARGO_TARGET_DIR/release/examples/pg_bench" "$@"
