#!/usr/bin/env bash
# Side-by-side with bm25s (PyPI) on a BEIR-format set, in one run (RUNS=3 interleaved rounds): nDCG@10, recall@100 and
# single-thread queries per second of bm25s and of ragtrail's BM25 leg, same queries, top 100,
# index build excluded. Never part of the test suite.
#
#   bench/peer_bm25s.sh [BEIR_DIR] [SPLIT]      default: ../shared/data/scifact train
#
# bm25s and its dependencies go to a virtualenv outside the repository
# (RAGTRAIL_BENCH_VENV, default ~/.cache/ragtrail-bench/venv), installed on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
beir=${1:-../shared/data/scifact}
split=${2:-train}
venv=${RAGTRAIL_BENCH_VENV:-$HOME/.cache/ragtrail-bench/venv}
if ! "$venv/bin/python" -c "import bm25s, Stemmer, threadpoolctl" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "bm25s==0.3.16" numpy scipy PyStemmer threadpoolctl
fi
cargo build --release --quiet
ragtrail=$CARGO_TARGET_DIR/release/ragtrail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F)"
# One thread everywhere. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow a current numpy on this
# machine kind (see the environment notes): unset for the peer's command alone.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 RAYON_NUM_THREADS=1
peer() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" bench/peer_bm25s.py bm25s \
    --beir "$beir" --split "$split" --k 100 --out "$1" 2>/dev/null
}
ours() {
  local out=$1
  shift
  # The hashing embedder: the BM25 leg does not read vectors, and the default model would
  # embed the whole corpus first (minutes on 2 cores) for nothing.
  "$ragtrail" --embedder hashing eval retrieval --beir "$beir" --split "$split" --modes bm25 --depth 100 \
    --timing --json --per-query "$out.jsonl" "$@" >"$out" 2>/dev/null
}
# Interleaved, three times: every engine sees the same machine load; the best run of each counts.
runs=${RUNS:-3}
for i in $(seq 1 "$runs"); do
  peer "$work/peer$i.json"
  ours "$work/default$i.json"
  ours "$work/single$i.json" --title-in-text --title-boost 0
done
list() { local IFS=,; echo "$*"; }
"$venv/bin/python" bench/peer_bm25s.py compare --beir "$beir" --split "$split" \
  "$(list "$work"/peer*.json)" \
  "default (title as titlePath, title boost 1.5)=$(list "$work"/default?.json):$work/default1.json.jsonl" \
  "title + text in one field, as bm25s (--title-in-text --title-boost 0)=$(list "$work"/single?.json):$work/single1.json.jsonl"
