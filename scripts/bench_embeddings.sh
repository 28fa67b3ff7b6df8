#!/usr/bin/env bash
# Embedding benchmarks (never part of the test suite), for BENCHMARKS.md:
#   1. local-model throughput (all-MiniLM-L6-v2, batch 32) in tokens/s and chunks/s;
#   2. retrieval quality on SciFact train (BM25, MiniLM, fusions) and cmrc2018 (hashing vs MiniLM).
#   scripts/bench_embeddings.sh [SHARED_DATA_DIR]     default: ../shared/data
# Embedding SciFact's 5,183 abstracts takes about ten minutes on 2 cores; EVAL_INDEX_DIR keeps
# the ingested indexes between runs (default: a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
data=${1:-../shared/data}
model=$(bash scripts/install_test_model.sh)
index=${EVAL_INDEX_DIR:-$(mktemp -d)}
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m); $(date -u +%F); load $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --release -p ragtrail --example embed_bench --example beir_eval
bin="$CARGO_TARGET_DIR/release/examples"
inputs=(knowledge)
[ -d "$data/handbook-en" ] && inputs+=("$data/handbook-en")
[ -f "$data/scifact/corpus.jsonl" ] && inputs+=("$data/scifact/corpus.jsonl")
"$bin/embed_bench" --model "$model" --batch 32 --limit 640 "${inputs[@]}"
if [ -d "$data/scifact" ]; then
  "$bin/beir_eval" "$data/scifact" --split train --embedder local --model "$model" --index "$index/scifact-local"
fi
if [ -d "$data/cmrc2018" ]; then
  for embedder in hashing local; do
    "$bin/beir_eval" "$data/cmrc2018" --split dev --embedder "$embedder" --model "$model" \
      --index "$index/cmrc2018-$embedder" --fusions bm25,vector,rrf,minmax0.5,minmax0.3
  done
fi
