#!/usr/bin/env python3
"""Where a command's memory goes over time (Linux): its resident set, sampled every 50 ms.

    python3 bench/rss_timeline.py COMMAND [ARGS...]

Runs COMMAND (its output discarded, its stderr kept in rss_timeline.err), prints a line each time
VmRSS moved by 10 MB or more since the last line printed, then the exit status, the wall time and
the peak VmHWM read at the last sample. Read beside the command's phases (for an ingest: scan,
embed, write, index) to see which one holds what. See BENCHMARKS.md, "An ingest writes its vectors
as they come"."""
import subprocess, sys, time

if len(sys.argv) < 2:
    sys.exit(__doc__)
with open("rss_timeline.err", "w") as err:
    proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=err)
    start, printed, peak = time.time(), None, 0
    while proc.poll() is None:
        try:
            fields = dict(
                line.split(":", 1) for line in open(f"/proc/{proc.pid}/status") if ":" in line
            )
            rss = int(fields["VmRSS"].split()[0]) // 1024
            peak = max(peak, int(fields["VmHWM"].split()[0]) // 1024)
        except (OSError, KeyError, ValueError):
            # The process ended between poll() and the read.
            rss = None
        if rss is not None and (printed is None or abs(rss - printed) >= 10):
            print(f"{time.time() - start:7.2f} s {rss:6d} MB", flush=True)
            printed = rss
        time.sleep(0.05)
print(f"exit {proc.returncode}, {time.time() - start:.1f} s, peak {peak} MB (VmHWM)")
