#!/usr/bin/env bash
# Benchmarks (never part of the test suite). Prints Markdown rows to paste into BENCHMARKS.md.
#   scripts/bench.sh [SHARED_DATA_DIR]     default: ../shared/data
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
data=${1:-../shared/data}
# `cargo bench` runs the benchmark from its package's folder: hand it absolute paths.
[ -d "$data" ] && data=$(cd "$data" && pwd)
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m); $(date -u +%F)"
folders=("$PWD/knowledge")
for d in laws-zh handbook-en; do
  [ -d "$data/$d" ] && folders+=("$data/$d")
done
echo "== searchDocs and ingest (cargo bench -p ragtrail --bench retrieval)"
cargo bench -p ragtrail --bench retrieval -- --synthetic 100000 "${folders[@]}"
echo "== golden-set calibration (boost, fusion, sufficiency)"
cargo run --release -p ragtrail --example calibrate
echo "== offline agent on the golden set"
cargo run --release -p ragtrail --example agent_eval
cargo build --release --quiet
ragtrail=${CARGO_TARGET_DIR}/release/ragtrail
# The rows are the hashing embedder's, as the examples above (which use the library's default):
# set RAGTRAIL_EMBEDDER (or a model) to measure another.
export RAGTRAIL_EMBEDDER=${RAGTRAIL_EMBEDDER:-hashing}
if [ -d "$data/scifact" ]; then
  echo "== retrieval quality per fusion mode, SciFact train (ragtrail eval retrieval)"
  "$ragtrail" eval retrieval --beir "$data/scifact" --split train --timing
  echo "== side by side with bm25s (bench/peer_bm25s.sh)"
  bench/peer_bm25s.sh "$data/scifact" train
fi
if [ -d "$data/hotpotqa-dev103" ]; then
  echo "== multi-round joint recall, offline planner (ragtrail eval multihop)"
  "$ragtrail" eval multihop --beir "$data/hotpotqa-dev103" --planner offline --today 2026-11-30
fi
