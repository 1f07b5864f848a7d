#!/usr/bin/env bash
# Compares NDB builds of ndbgate (make build-ndb) on a live cluster: each
# trial runs memtier against each build in turn, alternated, and records
# keys/s, the CPU µs per key of the gateway and of the local data nodes
# (ndbd/ndbmtd), and memtier's p50 and p99 in ms. Then the median of each
# build's per-trial ratios to the first, with their range.
# compare-builds.sh is the same for the embedded engine.
#
# It never builds NDB. It takes from the environment:
#   NDB_CONNECTSTRING  the management server, e.g. 127.0.0.1:1186 (required)
#   NDB_LIB_DIR        where libndbclient is, if the loader does not find it
#   MODE               mget100 (default): 100-key gets, 2 x 8 connections,
#                      each its own key range in sequence, on bench.flexlike
#                      (bench/likeflex.yaml), as live.sh's likeflex group;
#                      mget300: 300-key gets, which a text get's slices
#                      (protocols/memcache, getKeysPerServe) may cut;
#                      get1_p16: single gets at pipeline 16, same table;
#                      bin_get1_p16: the same in the binary protocol;
#                      get1_p64: single gets at pipeline 64, deep enough
#                      to be bulk (protocols/memcache, bulkFromKeys);
#                      c1: one connection, 1:10 sets and gets;
#                      c2: two, on two memtier threads, each one request
#                      at a time;
#                      p1: 1:10 at pipeline 1 on 2 x 8 connections;
#                      c64: the same on 2 x 32 (live.sh's coalesce clients)
#   TABLE              flexlike (default): the modes' table above;
#                      demo_table: ndbmemcache's demo container (no
#                      --config), as live.sh's memtier group against
#                      ndbmemcache; its expire column makes reads check expiry
#   TRIALS (5), TIME (seconds a run, 10), PRELOAD (1: store the keys first;
#                      with 0, a run whose gets miss stops the script)
#   memtier_benchmark on PATH
#
#   NDB_CONNECTSTRING=127.0.0.1:1186 NDB_LIB_DIR=/opt/ndb/lib \
#     TRIALS=10 TIME=8 bench/compare-ndb-builds.sh /tmp/ndbgate-before /tmp/ndbgate-after
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

TRIALS=${TRIALS:-5} TIME=${TIME:-10} MODE=${MODE:-mget100} PRELOAD=${PRELOAD:-1} TABLE=${TABLE:-flexlike}
proto=memcache_text
KEYS=100000 PORT=22330 REST=22331
[ $# -ge 2 ] || { echo "usage: $0 NDB_BUILD NDB_BUILD..." >&2; exit 2; }
[ -n "${NDB_CONNECTSTRING:-}" ] || { echo "compare-ndb-builds: set NDB_CONNECTSTRING (the cluster's management server)" >&2; exit 2; }
command -v memtier_benchmark >/dev/null || { echo "compare-ndb-builds: memtier_benchmark is not on PATH (see bench/run-memtier.sh)" >&2; exit 2; }
[ -n "${NDB_LIB_DIR:-}" ] && export LD_LIBRARY_PATH="$NDB_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for b in "$@"; do
  "$b" version 2>&1 | grep -q ndbapi || { echo "compare-ndb-builds: $b does not run, or lacks the ndbapi driver" >&2; exit 2; }
done
case $MODE in
  mget100) args=(-t 2 -c 8 --ratio=0:100 --pipeline=1 --multi-key-get=100 --key-pattern=P:P) batch=100 ;;
  mget300) args=(-t 2 -c 8 --ratio=0:300 --pipeline=1 --multi-key-get=300 --key-pattern=P:P) batch=300 ;;
  get1_p16) args=(-t 2 -c 8 --ratio=0:1 --pipeline=16 --key-pattern=P:P) batch=1 ;;
  bin_get1_p16) args=(-t 2 -c 8 --ratio=0:1 --pipeline=16 --key-pattern=P:P) batch=1 proto=memcache_binary ;;
  get1_p64) args=(-t 2 -c 8 --ratio=0:1 --pipeline=64 --key-pattern=P:P) batch=1 ;;
  c1) args=(-t 1 -c 1 --ratio=1:10 --pipeline=1 --key-pattern=R:R) batch=1 ;;
  c2) args=(-t 2 -c 1 --ratio=1:10 --pipeline=1 --key-pattern=R:R) batch=1 ;;
  p1) args=(-t 2 -c 8 --ratio=1:10 --pipeline=1 --key-pattern=R:R) batch=1 ;;
  c64) args=(-t 2 -c 32 --ratio=1:10 --pipeline=1 --key-pattern=R:R) batch=1 ;;
  *) echo "compare-ndb-builds: unknown MODE $MODE (mget100 mget300 get1_p16 bin_get1_p16 get1_p64 c1 c2 p1 c64)" >&2; exit 2 ;;
esac
case $TABLE in
  flexlike) config=(--config bench/likeflex.yaml) ;;
  demo_table) config=() ;;
  *) echo "compare-ndb-builds: unknown TABLE $TABLE (flexlike demo_table)" >&2; exit 2 ;;
esac

gw=""
trap '[ -n "$gw" ] && kill "$gw" 2>/dev/null; wait 2>/dev/null || true' EXIT
out=$(mktemp)
ndbd_ticks() {
  local s=0 p
  for p in $(pgrep -x 'ndbd|ndbmtd'); do s=$((s + $(proc_ticks "$p"))); done
  echo "$s"
}
CLK=$(getconf CLK_TCK)
start() {
  "$1" serve --ndb-connectstring "$NDB_CONNECTSTRING" --ndb-pool-size 2 --memcache "127.0.0.1:$PORT" \
    --rest "127.0.0.1:$REST" --grpc "" --log-level warn "${config[@]}" >"$out.log" 2>&1 &
  gw=$!
  wait_ready "$gw" "$REST" "$out.log" "compare-ndb-builds ($1)" || exit 1
}
stop() { kill "$gw"; wait "$gw" 2>/dev/null || true; gw=""; }

if [ "$PRELOAD" = 1 ]; then
  start "$1"
  memtier_preload "$PORT" "$KEYS" --protocol=memcache_text -d 32 -t 2 -c 4 --pipeline=16 --key-minimum=1 >/dev/null 2>&1
  stop
fi
builds=("$@")
for r in $(seq "$TRIALS"); do
  for i in $(seq 0 $(($# - 1))); do # the order rotates from trial to trial
    b=${builds[$(((i + r - 1) % $#))]}
    start "$b"
    sleep 1 # connected and described: the run measures reads only
    c0=$(proc_ticks "$gw") n0=$(ndbd_ticks)
    memtier_benchmark -s 127.0.0.1 -p "$PORT" --protocol="$proto" --hide-histogram -d 32 --key-minimum=1 \
      --key-maximum="$KEYS" --test-time="$TIME" --distinct-client-seed --randomize "${args[@]}" \
      --json-out-file="$out.json" >/dev/null 2>&1
    c1=$(proc_ticks "$gw") n1=$(ndbd_ticks)
    read -r _ keys hit p50 p99 _ < <(python3 bench/memtier_json.py "$out.json" "$TIME" "$batch")
    # Every key was stored: a miss means the table was emptied since (the
    # live e2e suite flushes it), and misses measure nothing of a read.
    if awk -v h="$hit" 'BEGIN {exit !(h < 0.99)}'; then
      echo "compare-ndb-builds: $b: only $hit of the gets hit; store the keys again (PRELOAD=1)" >&2
      exit 1
    fi
    awk -v b="$b" -v r="$r" -v d=$((c1 - c0)) -v nd=$((n1 - n0)) -v c="$CLK" -v k="$keys" -v t="$TIME" -v p50="$p50" -v p99="$p99" \
      'BEGIN {printf "%s %d %d %.3f %.3f %s %s\n", b, r, k, d / c * 1e6 / (k * t), nd / c * 1e6 / (k * t), p50, p99}' | tee -a "$out"
    stop
  done
done
host_line
echo "$MODE on $TABLE | build / first: keys/s, gateway CPU per key, data node CPU per key (medians of per-trial ratios, range; lower CPU in N of trials)"
python3 - "$out" "$@" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    b, r, keys, gw, nd = line.split()[:5]
    runs[r][b] = (float(keys), float(gw), float(nd))
first = sys.argv[2]
def spread(xs):
    xs = sorted(xs)
    return f"{statistics.median(xs):.3f} ({xs[0]:.3f}-{xs[-1]:.3f})" if xs else "-"
for b in sys.argv[2:]:
    med = [statistics.median(runs[r][b][i] for r in runs if b in runs[r]) for i in range(3)]
    line = f"{b}: {med[0]:,.0f} keys/s, {med[1]:.2f} + {med[2]:.2f} µs a key"
    if b != first:
        ratios = [[runs[r][b][i] / runs[r][first][i] for r in runs if b in runs[r] and first in runs[r]] for i in range(3)]
        lower = sum(1 for x in ratios[1] if x < 1)
        line += f" | {spread(ratios[0])}, {spread(ratios[1])} (lower in {lower} of {len(ratios[1])}), {spread(ratios[2])}"
    print(line)
PY
rm -f "$out" "$out.json" "$out.log"
