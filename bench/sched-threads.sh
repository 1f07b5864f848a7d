#!/usr/bin/env bash
# How the kernel schedules a server's threads under the default memtier load
# (text, 2 threads x 25 connections, 1:10, 32 B, 100k keys preloaded): which
# threads run, how long per 200 ms window, and how they leave the CPU. Used to
# see whether the event loops stay on their threads (bench/HISTORY.md, ninth
# pass). Needs perf (linux-perf) and memtier_benchmark on PATH.
#
#   bench/sched-threads.sh                 # ndbgate, built from this tree
#   bench/sched-threads.sh memcached       # memcached -t 2, for comparison
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
TARGET=${1:-ndbgate}
PORT=${PORT:-22190}
for tool in perf memtier_benchmark; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "sched-threads: $tool is not on PATH (perf: apt-get install linux-perf; memtier_benchmark: see bench/run-memtier.sh)" >&2
    exit 2
  fi
done
tmp=$(mktemp -d /tmp/ndbgate-sched.XXXXXX)
if [ "$TARGET" = memcached ]; then
  memcached -p "$PORT" -U 0 -l 127.0.0.1 -t 2 -m 1024 -c 4096 -u "$(id -un)" &
  comm=mc-worker
else
  go build -o "$tmp/ndbgate" ./cmd/ndbgate
  "$tmp/ndbgate" serve --memcache "127.0.0.1:$PORT" --rest "" --grpc "" --log-level warn &
  comm=ndbgate
fi
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 0.5
common=(-s 127.0.0.1 -p "$PORT" --protocol=memcache_text --hide-histogram -d 32 --key-minimum=1 --key-maximum=100000)
memtier_preload "$PORT" 100000 "${common[@]}" -t 1 -c 1 >/dev/null 2>&1
memtier_benchmark "${common[@]}" -t 2 -c 25 --ratio=1:10 --test-time=6 --key-pattern=R:R >"$tmp/memtier.txt" 2>&1 &
load=$!
sleep 1.5
perf record -q -o "$tmp/sched.data" -e sched:sched_switch -a -- sleep 2 >/dev/null 2>&1
wait $load
grep Totals "$tmp/memtier.txt" || true
perf script -i "$tmp/sched.data" -F time,trace 2>/dev/null | python3 -c '
import collections, re, sys
comm = sys.argv[1]
pat = re.compile(r"^\s*([\d.]+):\s+prev_comm=(.*?) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)")
run = collections.defaultdict(lambda: collections.defaultdict(float))
left = collections.defaultdict(collections.Counter)
since, t0 = {}, None
for line in sys.stdin:
    m = pat.search(line)
    if not m:
        continue
    t, pc, pp, st, nc, np = float(m[1]), m[2], m[3], m[4], m[5], m[6]
    t0 = t if t0 is None else t0
    if pp in since:
        s = since.pop(pp)
        run[(pc, pp)][int((s - t0) / 0.2)] += (t - s) * 1000
    left[(pc, pp)]["runnable" if st.startswith("R") else "sleeping"] += 1
    since[np] = t
print("thread                      ms on CPU per 200 ms window            left CPU: runnable / sleeping")
for k in sorted(run):
    if not k[0].startswith((comm[:15], "memtier")) or sum(run[k].values()) < 5:
        continue
    cells = " ".join("%4.0f" % run[k].get(i, 0) for i in range(10))
    print("%-16s %-8s %s   %6d / %6d" % (k[0], k[1], cells, left[k]["runnable"], left[k]["sleeping"]))
' "$comm"
