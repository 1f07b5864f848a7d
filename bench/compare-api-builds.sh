#!/usr/bin/env bash
# Alternates ndbgate-bench runs over REST, gRPC and memcache against two
# ndbgate binaries (two commits, say, before and after a change): per
# trial each binary is started afresh, on the embedded engine (keys stored
# first) or, with NDB_CONNECTSTRING, on a cluster (keys stored already, as
# compare-ndb-builds.sh leaves them), and each protocol runs with 1 and
# with 16 connections, one request at a time each. Prints one line per run
# (trial binary connections protocol requests/s server-CPU-µs-a-request
# p50-µs), then for each workload the medians of the second binary's
# per-trial ratios to the first's, with their range.
#
#   bench/compare-api-builds.sh /tmp/ndbgate-before /tmp/ndbgate-after
#   TRIALS=5 TIME=5s CONNS="1" PROTOS="rest-kv grpc-kv" bench/compare-api-builds.sh B A
#   NDB_CONNECTSTRING=127.0.0.1:1186 NDB_LIB_DIR=/opt/ndb/lib bench/compare-api-builds.sh B A
#
# The order rotates from trial to trial. Measure only on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
TRIALS=${TRIALS:-5}
TIME=${TIME:-5s}
CONNS=${CONNS:-1 16}
PROTOS=${PROTOS:-rest-kv rest-pkread grpc-kv grpc-rondb memcache-text}
PORT=${PORT:-22350}
[ $# -eq 2 ] || { echo "usage: $0 NDBGATE_BINARY NDBGATE_BINARY" >&2; exit 2; }
[ -n "${NDB_LIB_DIR:-}" ] && export LD_LIBRARY_PATH="$NDB_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d)
gw=""
trap '[ -n "$gw" ] && kill "$gw" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/ndbgate-bench" ./bench/cmd/ndbgate-bench
backend=()
[ -n "${NDB_CONNECTSTRING:-}" ] && backend=(--ndb-connectstring "$NDB_CONNECTSTRING")
MC=127.0.0.1:$PORT REST=127.0.0.1:$((PORT + 1)) GRPC=127.0.0.1:$((PORT + 2))
builds=("$@")
for r in $(seq "$TRIALS"); do
  for i in 0 1; do
    b=${builds[$(((i + r) % 2))]}
    for c in $CONNS; do
      "$b" serve "${backend[@]}" --memcache "$MC" --rest "$REST" --grpc "$GRPC" --log-level warn >"$tmp/log" 2>&1 &
      gw=$!
      wait_ready "$gw" "${REST#*:}" "$tmp/log" "compare-api-builds ($b)"
      [ -n "${NDB_CONNECTSTRING:-}" ] || "$tmp/ndbgate-bench" -proto memcache-text -addr "$MC" -conns 2 -ratio 1:0 \
        -keys 100000 -preload -duration 1s -warmup 0s -quiet >/dev/null
      for p in $PROTOS; do
        case $p in memcache*) a=$MC ;; rest*) a=$REST ;; grpc*) a=$GRPC ;; esac
        "$tmp/ndbgate-bench" -proto "$p" -addr "$a" -conns "$c" -ratio 0:1 -duration "$TIME" -quiet \
          -server-pid "$gw" -json "$tmp/run.json" >/dev/null
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], "c"+sys.argv[4], sys.argv[5], round(j["ops_per_s"]), round(j["server"]["cpu_us_per_key"], 1), round(j["latency_us"]["P50"]))' \
          "$tmp/run.json" "$r" "$b" "$c" "$p" | tee -a "$tmp/out"
      done
      kill "$gw"
      wait "$gw" 2>/dev/null || true
      gw=""
    done
  done
done
echo "workload | second / first: requests/s, server CPU a request, p50 (medians of per-trial ratios, range) | first: requests/s, CPU µs"
python3 - "$tmp/out" "$1" "$2" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, b, c, p, ops, cpu, p50 = line.split()
    runs[(c, p, r)][b] = (float(ops), float(cpu), float(p50))
a, b = sys.argv[2], sys.argv[3]
def spread(xs):
    xs = sorted(xs)
    return f"{statistics.median(xs):.3f} ({xs[0]:.3f}-{xs[-1]:.3f})"
for c, p in sorted({(c, p) for c, p, _ in runs}):
    both = [v for (cc, pp, _), v in runs.items() if (cc, pp) == (c, p) and a in v and b in v]
    ratios = [[v[b][i] / v[a][i] for v in both] for i in range(3)]
    first = [statistics.median(v[a][i] for v in both) for i in range(2)]
    print(f"{c} {p} | {spread(ratios[0])}, {spread(ratios[1])}, {spread(ratios[2])} | {first[0]:,.0f}, {first[1]:.1f}")
PY
