#!/usr/bin/env bash
# Arize Phoenix, a real OpenTelemetry (OTLP) receiver with an LLM-trace UI, for the tests of
# the OpenTelemetry export (docs/telemetry.md) and for anyone who wants to watch runs locally:
# loopback only, no root, its data in the given folder.
#
# The server is the PyPI package `arize-phoenix`, installed once into a virtual environment in
# a cache folder outside the clone: ${RAGTRAIL_CACHE:-~/.cache/ragtrail}/phoenix/VERSION
# (about 860 MB; a few minutes the first time, nothing after).
#
#   scripts/phoenix-server.sh install          install the package if missing
#   scripts/phoenix-server.sh start DIR        start Phoenix on 127.0.0.1 with free ports (its
#                                              UI, REST API and OTLP/HTTP receiver on one, gRPC
#                                              on another), its database, pid and log in DIR;
#                                              wait for /healthz, then print the settings to
#                                              use, one NAME=value line each (ready for eval)
#   scripts/phoenix-server.sh stop DIR         stop the server started in DIR and delete DIR
#
# Printed: RAGTRAIL_TEST_PHOENIX_URL (UI and REST API) and RAGTRAIL_TEST_OTLP_ENDPOINT (the
# value for OTEL_EXPORTER_OTLP_ENDPOINT: spans go to its /v1/traces).
set -euo pipefail

version=20.26.1
cache=${RAGTRAIL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragtrail}
venv="$cache/phoenix/$version"

die() {
  echo "phoenix-server.sh: error: $*" >&2
  exit 1
}

install_server() {
  [ -f "$venv/.installed" ] && return 0
  command -v python3 >/dev/null || die "python3 is needed to install arize-phoenix"
  mkdir -p "$cache/phoenix"
  local tmp
  tmp=$(mktemp -d "$cache/phoenix/.install.XXXXXX")
  echo "phoenix-server.sh: installing arize-phoenix==$version into $venv (a few minutes, once)" >&2
  # The environment is used only through `$venv/bin/python -m …`, which still works after the
  # folder is renamed (its scripts' #! lines would not).
  if ! python3 -m venv "$tmp" >&2 ||
    ! "$tmp/bin/python" -m pip install -q --disable-pip-version-check \
      "arize-phoenix==$version" >&2; then
    rm -rf "$tmp"
    die "could not install arize-phoenix==$version from PyPI (is the package registry reachable?)"
  fi
  touch "$tmp/.installed"
  # Another run may have finished first: keep whichever landed.
  mv -T "$tmp" "$venv" 2>/dev/null || rm -rf "$tmp"
  [ -f "$venv/.installed" ] || die "the installation in $venv is incomplete"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

healthy() {
  python3 - "$1" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen("http://127.0.0.1:%s/healthz" % sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}

start_server() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    die "a server started in $dir is running already (pid $(cat "$dir/pid")); stop it first"
  fi
  local port grpc_port
  port=$(free_port)
  grpc_port=$(free_port)
  while [ "$grpc_port" = "$port" ]; do grpc_port=$(free_port); done
  # Loopback only, its SQLite database in DIR, no web analytics, nothing fetched from a CDN.
  PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$port" PHOENIX_GRPC_PORT="$grpc_port" \
    PHOENIX_WORKING_DIR="$dir" PHOENIX_TELEMETRY_ENABLED=false \
    PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \
    nohup "$venv/bin/python" -m phoenix.server.main serve >"$dir/server.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  echo "$port" >"$dir/port"
  local i
  for i in $(seq 1 240); do
    if healthy "$port"; then
      echo "RAGTRAIL_TEST_PHOENIX_URL=http://127.0.0.1:$port"
      echo "RAGTRAIL_TEST_OTLP_ENDPOINT=http://127.0.0.1:$port"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || die "Phoenix exited at once; its log says: $(tail -5 "$dir/server.log")"
    sleep 0.5
  done
  kill "$pid" 2>/dev/null || true
  die "Phoenix on port $port did not answer /healthz within 120 s; its log says: $(tail -5 "$dir/server.log")"
}

stop_server() {
  local dir=$1
  if [ -f "$dir/pid" ]; then
    local pid
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      local i
      for i in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  install)
    install_server
    ;;
  start)
    [ -n "${2:-}" ] || die "usage: $0 start DIR"
    install_server
    start_server "$2"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: $0 stop DIR"
    stop_server "$2"
    ;;
  *)
    echo "usage: $0 install | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
