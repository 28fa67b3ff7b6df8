#!/usr/bin/env bash
# `ragtrail mcp` driven by the reference MCP client: the inspector's command-line mode
# (npm package @modelcontextprotocol/inspector), over stdio, against the bundled knowledge.
#
#   bash scripts/mcp-inspector.sh [RAGTRAIL_BINARY]
#
# Installs the inspector once into ~/.cache/ragtrail/npm (outside the clone; needs node and
# npm, and the npm registry the first time), ingests knowledge/ into a scratch directory, then:
#   1. tools/list   lists searchDocs and ask, each with an input schema;
#   2. tools/call   searchDocs finds the statutory annual-leave section, with a runId;
#   3. ragtrail audit RUN_ID says the call's trace is intact (every MCP call is traced).
# Exits non-zero, saying which step failed, if any does. scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
INSPECTOR_VERSION=2.12.0
cache=${RAGTRAIL_NPM_CACHE:-$HOME/.cache/ragtrail/npm}/inspector-$INSPECTOR_VERSION
bin=${1:-${CARGO_TARGET_DIR:-target}/debug/ragtrail}
[ -x "$bin" ] || { echo "error: no ragtrail binary at $bin (build it first, or pass its path)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
if ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing node and npm (Debian packages) for the MCP inspector" >&2
    apt-get install -y -q nodejs npm >&2 || { apt-get update -q >&2 && apt-get install -y -q nodejs npm >&2; }
  fi
  command -v npm >/dev/null || { echo "error: npm is needed for the MCP inspector (apt-get install nodejs npm)" >&2; exit 1; }
fi

inspector=$cache/node_modules/.bin/mcp-inspector
if [ ! -x "$inspector" ]; then
  echo "== installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into $cache" >&2
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-mcp-inspector.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The inspector keeps a catalog of servers; this run's stays in the scratch directory.
export MCP_CATALOG_PATH=$work/catalog.json
rt=("$bin" --data-dir "$work/data" --knowledge "$PWD/knowledge" --trace-dir "$work/traces")
env -u DATABASE_URL "${rt[@]}" ingest >/dev/null

inspect() { env -u DATABASE_URL "$inspector" --cli "${rt[@]}" mcp "$@"; }

echo "== tools/list"
inspect --method tools/list >"$work/tools.json"
python3 - "$work/tools.json" <<'PY'
import json, sys
tools = {t["name"]: t for t in json.load(open(sys.argv[1]))["tools"]}
for name in ("searchDocs", "ask"):
    assert name in tools, f"tool {name} not listed: {sorted(tools)}"
    assert tools[name]["inputSchema"]["type"] == "object", tools[name]
assert "keywords" in tools["searchDocs"]["inputSchema"]["properties"], tools["searchDocs"]
print("tools:", ", ".join(sorted(tools)))
PY

echo "== tools/call searchDocs"
inspect --method tools/call --tool-name searchDocs \
  --tool-arg 'keywords=["年假","天数"]' topK=3 >"$work/call.json"
run_id=$(python3 - "$work/call.json" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
assert not result.get("isError"), result
body = result["structuredContent"]
titles = [h["titlePath"] for h in body["hits"]]
assert "年休假管理办法 / 年假天数 / 法定年假" in titles, titles
assert all(h["chunkId"].startswith("c_") and h["sourceUri"] for h in body["hits"]), body
print(body["runId"])
PY
)
echo "searchDocs: runId $run_id"

echo "== ragtrail audit $run_id"
env -u DATABASE_URL "${rt[@]}" audit "$run_id" >"$work/audit.txt" || {
  cat "$work/audit.txt" >&2; echo "error: the MCP call's trace does not audit clean" >&2; exit 1; }
grep -q "$run_id" "$work/audit.txt" || { echo "error: the audit does not name the run" >&2; exit 1; }
echo "mcp-inspector: ok"
