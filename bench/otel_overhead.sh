#!/usr/bin/env bash
# What OpenTelemetry export costs a run (docs/telemetry.md; BENCHMARKS.md, "OpenTelemetry
# export"): `ragtrail ask` in process (one command per question, as a user runs it, its
# bounded flush included) and `POST /v1/ask` over HTTP (one `ragtrail serve` with export off
# and one with it on), each question asked with export off and on, alternately, so
# both modes share the machine's load. The export goes to a real Arize Phoenix on loopback
# (scripts/phoenix-server.sh), or to RAGTRAIL_TEST_PHOENIX_URL when that names one. Offline
# planner, hashing embedder, the bundled knowledge/, the golden set's first questions.
# Prints Markdown rows for BENCHMARKS.md. Never part of the test suite.
#
#   bench/otel_overhead.sh [RUNS]     RUNS questions per mode (default 40)
#
# Builds and runs the release binary (RAGTRAIL_BENCH_BIN names another binary, e.g. a debug
# build for a dry run of the script).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ragtrail-target}
runs=${1:-40}
if [ -n "${RAGTRAIL_BENCH_BIN:-}" ]; then
  bin=$RAGTRAIL_BENCH_BIN
else
  cargo build --release -p ragtrail-cli --quiet
  bin=$CARGO_TARGET_DIR/release/ragtrail
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ragtrail-otel-bench.XXXXXX")
phoenix_dir=
cleanup() {
  if [ -n "$phoenix_dir" ]; then bash scripts/phoenix-server.sh stop "$phoenix_dir" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${RAGTRAIL_TEST_PHOENIX_URL:-}" ]; then
  phoenix_dir="$work/phoenix"
  eval "$(bash scripts/phoenix-server.sh start "$phoenix_dir")"
fi
# Only this script's settings reach the runs.
for v in $(env | sed -n 's/^\(OTEL_[A-Z_]*\)=.*/\1/p;s/^\(RAGTRAIL_[A-Z_]*\)=.*/\1/p'); do
  case "$v" in RAGTRAIL_TEST_PHOENIX_URL | RAGTRAIL_BENCH_BIN) ;; *) unset "$v" ;; esac
done
export RAGTRAIL_EMBEDDER=hashing
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -m); $(date -u '+%F %H:%M') UTC; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $bin; Phoenix: $RAGTRAIL_TEST_PHOENIX_URL; $runs questions per mode"
"$bin" --data-dir "$work/data" --knowledge knowledge --trace-dir "$work/traces" ingest >/dev/null
python3 - "$bin" "$work" "$runs" "$RAGTRAIL_TEST_PHOENIX_URL" <<'PY'
import json, os, statistics, subprocess, sys, time, urllib.request

binary, work, runs, phoenix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
questions = []
with open("eval/golden.jsonl", encoding="utf-8") as f:
    for line in f:
        questions.append(json.loads(line)["turns"][0]["question"])
questions = (questions * (runs // len(questions) + 1))[:runs]
base = [binary, "--data-dir", f"{work}/data", "--knowledge", "knowledge", "--trace-dir", f"{work}/traces"]
env_off = dict(os.environ)
project = f"otel-bench-{int(time.time())}"
env_on = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=phoenix,
              OTEL_EXPORTER_OTLP_HEADERS=f"x-project-name={project}")

def row(what, off, on):
    def q(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p * len(xs)))]
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"| {what} | {len(off)} | {m_off:.1f} | {m_on:.1f} | {m_on - m_off:+.1f} | "
          f"{q(off, .9):.1f} | {q(on, .9):.1f} |")

print("\n| what | runs per mode | median ms, export off | median ms, export on | difference | p90 off | p90 on |")
print("|---|---|---|---|---|---|---|")

# `ask` as a command: process start, engine open, the run, and (on) the flush before exit.
off, on = [], []
for i, q in enumerate(questions):
    order = [("off", env_off), ("on", env_on)] if i % 2 == 0 else [("on", env_on), ("off", env_off)]
    for mode, env in order:
        t = time.perf_counter()
        out = subprocess.run(base + ["ask", "--json", q], env=env, capture_output=True)
        ms = (time.perf_counter() - t) * 1e3
        # 0 answered, 1 insufficient evidence, 4 evidence: a run that ended; 3 is an error.
        if out.returncode not in (0, 1, 4) or b"OpenTelemetry" in out.stderr:
            sys.exit(f"ask failed ({mode}): {out.stderr.decode()[-500:]}")
        (off if mode == "off" else on).append(ms)
row("`ragtrail ask` (command, offline planner)", off, on)

# `POST /v1/ask` against two servers, export off and on.
token = subprocess.run(base + ["tokens", "add", "bench", "--tenant", "default"], env=env_off,
                       capture_output=True, check=True).stdout.decode().strip().splitlines()[-1]
def serve(env):
    p = subprocess.Popen(base + ["serve", "--listen", "127.0.0.1:0", "--planner", "offline"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if line.startswith("listening on "):
            return p, line.split()[-1].strip()
    sys.exit("serve did not start")
servers = {"off": serve(env_off), "on": serve(env_on)}
def ask_http(addr, q):
    req = urllib.request.Request(f"{addr}/v1/ask", data=json.dumps({"question": q}).encode(),
                                 headers={"authorization": f"Bearer {token}",
                                          "content-type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    return (time.perf_counter() - t) * 1e3
try:
    for q in questions[:3]:  # warm both servers
        for _, addr in servers.values():
            ask_http(addr, q)
    off, on = [], []
    for i, q in enumerate(questions):
        order = ["off", "on"] if i % 2 == 0 else ["on", "off"]
        for mode in order:
            (off if mode == "off" else on).append(ask_http(servers[mode][1], q))
    row("`POST /v1/ask` (serve, offline planner, sequential)", off, on)
finally:
    for p, _ in servers.values():
        p.terminate()
        p.wait()

# Phoenix holds what was sent: every run with export on, as a trace (it stores in the
# background, so give it a few seconds).
expected = min(2 * runs + 3, 1000)
deadline = time.time() + 15
while True:
    with urllib.request.urlopen(f"{phoenix}/v1/projects/{project}/spans?limit=1000&parent_id=null") as r:
        roots = len(json.load(r)["data"])
    if roots >= expected or time.time() > deadline:
        break
    time.sleep(0.5)
print(f"\nroot spans (runs) Phoenix received in project {project}: {roots} (expected {expected})")
PY
