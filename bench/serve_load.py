#!/usr/bin/env python3
"""Load on a running `ragtrail serve`, loopback only, bounded by CONC connections.

    python3 bench/serve_load.py PORT TOKEN PID CONC SECONDS

CONC threads, each with its own keep-alive connection to 127.0.0.1:PORT, send `POST /v1/search`
(three words of the synthetic corpus's vocabulary, top 5) in a loop for SECONDS. Prints the
requests, errors, p50/p99 latency, and the server's memory from /proc/PID/status (resident,
sampled every 0.2 s, and its peak). `/proc/PID/smaps_rollup` splits the resident memory into
anonymous and mapped files (see BENCHMARKS.md, item 3 of issue 43)."""
import http.client, json, sys, threading, time, statistics
port, token, pid, conc, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
words = "报销 发票 差旅 住宿 标准 审批 出差 补贴 claim invoice travel hotel limit approval receipt leave refund".split()
lat, errs = [], [0]
lock = threading.Lock()
start = threading.Barrier(conc + 1)
stop = [False]
def mem():
    d = {}
    for l in open(f'/proc/{pid}/status'):
        k, v = l.split(':', 1)
        if k in ('VmRSS', 'VmHWM', 'Threads'): d[k] = v.strip()
    return d
def worker(i):
    c = http.client.HTTPConnection('127.0.0.1', int(port), timeout=120)
    n = i
    start.wait()
    while not stop[0]:
        q = ' '.join(words[(n + k * 7) % len(words)] for k in range(3)); n += 1
        body = json.dumps({"keywords": q.split(), "topK": 5})
        t = time.perf_counter()
        try:
            c.request('POST', '/v1/search', body, {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'})
            r = c.getresponse(); r.read()
            ok = r.status == 200
        except Exception:
            ok = False
            c = http.client.HTTPConnection('127.0.0.1', int(port), timeout=120)
        with lock:
            if ok: lat.append((time.perf_counter() - t) * 1000)
            else: errs[0] += 1
ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(conc)]
for t in ts: t.start()
print('before', mem())
start.wait()
peak_rss = 0
end = time.time() + secs
while time.time() < end:
    time.sleep(0.2)
    m = mem(); peak_rss = max(peak_rss, int(m['VmRSS'].split()[0]))
stop[0] = True
for t in ts: t.join(timeout=130)
lat.sort()
if not lat:
    sys.exit(f"conc {conc}: no request succeeded ({errs[0]} errors): check the port and the token")
print(f"conc {conc}: {len(lat)} ok, {errs[0]} errors, {len(lat)/secs:.0f} req/s, p50 {statistics.median(lat):.1f} ms, p99 {lat[int(0.99*(len(lat)-1))]:.1f} ms; server RSS sampled peak {peak_rss/1024:.1f} MiB; after {mem()}")
