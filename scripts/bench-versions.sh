#!/usr/bin/env bash
# Storage overhead of kept chunk versions: ingest a copy of a knowledge folder, then edit a few
# of its Markdown files and re-ingest, ROUNDS times; print the store's bytes after each ingest
# (generation and versions.jsonl apart) and the bytes per kept version.
#
#   bash scripts/bench-versions.sh [KNOWLEDGE_DIR] [ROUNDS] [FILES_PER_ROUND]
#
# Uses the debug binary in $CARGO_TARGET_DIR (or target/); the hashing embedder; a temp dir.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="${1:-$root/knowledge}"
rounds="${2:-10}"
per_round="${3:-3}"
bin="${CARGO_TARGET_DIR:-$root/target}/debug/ragtrail"
[ -x "$bin" ] || { echo "build first: cargo build -p ragtrail-cli" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/knowledge"
cd "$work"
rt() { env -u RAGTRAIL_DATABASE_URL -u DATABASE_URL "$bin" --data-dir data --knowledge knowledge --embedder hashing "$@"; }
measure() {
  local gen versions count
  gen=$(du -sb --apparent-size data/store/gen-* | awk '{s+=$1} END {print s}')
  versions=$(stat -c %s data/store/versions.jsonl)
  count=$(wc -l < data/store/versions.jsonl)
  printf '%-6s %10d %12d %9d %10d\n' "$1" "$gen" "$versions" "$count" "$((gen + versions))"
}
rt ingest >/dev/null 2>&1
chunks=$(python3 -c "import json;print(len(open('data/store/'+open('data/store/CURRENT').read().strip()+'/chunks.jsonl').readlines()))")
echo "corpus: $src, $chunks chunks; $rounds re-ingests editing $per_round Markdown files each"
printf '%-6s %10s %12s %9s %10s\n' ingest "gen bytes" "versions B" versions "store B"
measure 0
mapfile -t files < <(cd knowledge && find . -name '*.md' | sort)
for ((r = 1; r <= rounds; r++)); do
  for ((f = 0; f < per_round; f++)); do
    file="knowledge/${files[$(( (r * per_round + f) % ${#files[@]} ))]}"
    # Edit one paragraph in the middle of the file: its chunk changes, the others stay.
    python3 - "$file" "$r" <<'PY'
import sys
path, r = sys.argv[1], sys.argv[2]
lines = open(path, encoding="utf-8").read().split("\n")
body = [i for i, l in enumerate(lines) if l.strip() and not l.startswith(("#", "---", "|", "title:", "tenant:", "roles:", "version:", "updated:", "status:"))]
i = body[len(body) // 2]
lines[i] = lines[i] + f" (rev {r})"
open(path, "w", encoding="utf-8").write("\n".join(lines))
PY
  done
  rt ingest >/dev/null 2>&1
  measure "$r"
done
python3 - <<'PY'
import json
lines = open("data/store/versions.jsonl", encoding="utf-8").read().splitlines()
sizes = [len(l.encode()) + 1 for l in lines]
texts = [len(json.loads(l)["text"].encode()) for l in lines]
print(f"per version: {sum(sizes) / len(sizes):.0f} bytes on average ({sum(texts) / len(texts):.0f} of them chunk text), {len(lines)} versions")
PY
