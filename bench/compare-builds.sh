#!/usr/bin/env bash
# Alternates memtier_benchmark runs against several ndbgate binaries (two
# commits, say, before and after a change) and memcached: per workload and
# trial, each target is started afresh, preloaded, and measured in turn.
# Prints one line per run (workload trial target ops/s p99-ms server-CPU-µs
# per op, and of those the kernel's, system time), then the medians of the
# per-trial ratios of each target to the first one: ops/s and server CPU
# per op.
#
#   bench/compare-builds.sh /tmp/ndbgate-old /tmp/ndbgate-new memcached
#   TRIALS=4 TIME=6 WORKLOADS="text_p16_1:10_32B" bench/compare-builds.sh B A
#   PRELOAD=0 WORKLOADS=binary_p16_gets bench/compare-builds.sh B A   # every get misses
#
# The order rotates from trial to trial (A B, then B A): on session 36's
# host the second target of a trial measured up to 4 % more CPU per op than
# the same binary run first (bench/HISTORY.md, session 37).
# Measure only on a quiet machine.
set -euo pipefail
TRIALS=${TRIALS:-${ROUNDS:-3}} # ROUNDS is its old name
TIME=${TIME:-8}
PORT=${PORT:-22700}
KEYS=${KEYS:-100000}
PRELOAD=${PRELOAD:-1} # 0: the keys are not stored first, so every get misses
# Each workload runs 2 threads of 25 connections, unless its name ends in
# _c1: one connection, one request at a time (a sidecar's common case);
# _c2, not run by default: two such connections, one a memtier thread.
# The _paced workloads, not run by default, leave each connection's client
# pauses, as an application does its own work between lookups: one
# connection at 1,000 requests a second, or at 50 (one every 20 ms), or 50
# connections at 200 each (10,000 in all).
# memtier paces in bursts: every 20 ms a connection sends a fiftieth of its
# rate, one request at a time. CPU per op is their figure; throughput is
# the pace.
declare -A ARGS=(
  [text_p1_1:10_32B_c1]="--protocol=memcache_text --pipeline=1 --ratio=1:10 -d 32 -t 1 -c 1"
  [binary_p1_1:10_32B_c1]="--protocol=memcache_binary --pipeline=1 --ratio=1:10 -d 32 -t 1 -c 1"
  [text_p1_1:10_32B_c2]="--protocol=memcache_text --pipeline=1 --ratio=1:10 -d 32 -t 2 -c 1"
  [text_p1_1:10_32B_c1_paced]="--protocol=memcache_text --pipeline=1 --ratio=1:10 -d 32 -t 1 -c 1 --rate-limiting=1000"
  [text_p1_1:10_32B_c1_every20ms]="--protocol=memcache_text --pipeline=1 --ratio=1:10 -d 32 -t 1 -c 1 --rate-limiting=50"
  [text_p1_1:10_32B_paced]="--protocol=memcache_text --pipeline=1 --ratio=1:10 -d 32 --rate-limiting=200"
  [text_p1_1:10_32B]="--protocol=memcache_text --pipeline=1 --ratio=1:10 -d 32"
  [binary_p1_1:10_32B]="--protocol=memcache_binary --pipeline=1 --ratio=1:10 -d 32"
  [text_p16_1:10_32B]="--protocol=memcache_text --pipeline=16 --ratio=1:10 -d 32"
  [binary_p16_1:10_32B]="--protocol=memcache_binary --pipeline=16 --ratio=1:10 -d 32"
  [text_p16_1:1_32B]="--protocol=memcache_text --pipeline=16 --ratio=1:1 -d 32"
  [binary_p16_1:1_32B]="--protocol=memcache_binary --pipeline=16 --ratio=1:1 -d 32"
  [binary_p16_1:1_1024B]="--protocol=memcache_binary --pipeline=16 --ratio=1:1 -d 1024"
  [binary_p16_gets]="--protocol=memcache_binary --pipeline=16 --ratio=0:1 -d 32"
)
WORKLOADS=${WORKLOADS:-"text_p1_1:10_32B_c1 binary_p1_1:10_32B_c1 text_p1_1:10_32B binary_p1_1:10_32B text_p16_1:10_32B binary_p16_1:10_32B binary_p16_1:1_32B binary_p16_1:1_1024B"}
[ $# -ge 2 ] || { echo "usage: $0 TARGET TARGET... (an ndbgate binary's path, or memcached)" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
host_line
command -v memtier_benchmark >/dev/null || { echo "compare-builds: memtier_benchmark is not on PATH (see bench/run-memtier.sh)" >&2; exit 2; }
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT
CLK=$(getconf CLK_TCK)
out=$(mktemp)
targets=("$@")
for w in $WORKLOADS; do
  args=${ARGS[$w]:?unknown workload $w}
  read -r -a a <<< "$args"
  # The preload runs unpaced: memtier paces a connection in bursts of a
  # fiftieth of its rate every 20 ms, and at 1,000 a second would take 100 s.
  pre=()
  for x in "${a[@]}"; do [[ $x == --rate-limiting=* ]] || pre+=("$x"); done
  for r in $(seq "$TRIALS"); do
    for i in $(seq 0 $(($# - 1))); do
      t=${targets[$(((i + r - 1) % $#))]}
      start_target "$t" "$PORT"
      [ "$PRELOAD" = 0 ] || memtier_preload "$PORT" "$KEYS" "${pre[@]}" --pipeline=16 -t 2 -c 4 >/dev/null 2>&1
      c0=$(proc_ticks "$pid") s0=$(proc_sys_ticks "$pid")
      memtier_benchmark -s 127.0.0.1 -p "$PORT" --hide-histogram -t 2 -c 25 "${a[@]}" \
        --key-pattern=R:R --key-maximum="$KEYS" --test-time "$TIME" --json-out-file="$out.json" >/dev/null 2>&1
      c1=$(proc_ticks "$pid") s1=$(proc_sys_ticks "$pid")
      # ops/s and p99; memtier's own rates divide by a misreported duration
      # (memtier_json.py). Then the server's CPU µs per op over the run.
      res=$(python3 "$(dirname "$0")/memtier_json.py" "$out.json" "$TIME" | awk '{print $1, $5}')
      cpu=$(awk -v d=$((c1 - c0)) -v c="$CLK" -v ops="${res%% *}" -v t="$TIME" 'BEGIN {printf "%.2f", d / c * 1e6 / (ops * t)}')
      sys=$(awk -v d=$((s1 - s0)) -v c="$CLK" -v ops="${res%% *}" -v t="$TIME" 'BEGIN {printf "%.2f", d / c * 1e6 / (ops * t)}')
      echo "$w $r $t $res $cpu $sys" | tee -a "$out"
      kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    done
  done
done
python3 - "$out" "$@" <<'EOF'
import collections, statistics, sys
path, targets = sys.argv[1], sys.argv[2:]
runs, cpus = collections.defaultdict(dict), collections.defaultdict(dict)
for line in open(path):
    w, r, t, ops, _, cpu = line.split()[:6]
    runs[(w, r)][t], cpus[(w, r)][t] = float(ops), float(cpu)
def spread(v):
    v = sorted(v)
    return f"{statistics.median(v):.2f} ({v[0]:.2f}-{v[-1]:.2f})"
print("workload | target / first: ops/s, server CPU per op (medians of per-trial ratios, range)")
for w in dict.fromkeys(k[0] for k in runs):
    keys = [k for k in runs if k[0] == w]
    parts = []
    for t in targets[1:]:
        ops = [runs[k][t] / runs[k][targets[0]] for k in keys if t in runs[k] and targets[0] in runs[k]]
        cpu = [cpus[k][t] / cpus[k][targets[0]] for k in keys if t in cpus[k] and cpus[k].get(targets[0])]
        parts.append(f"{t} / {targets[0]}: ops/s {spread(ops)}, CPU/op {spread(cpu)}")
    print(w, "|", " | ".join(parts))
EOF
rm -f "$out" "$out.json"
