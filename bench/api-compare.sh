#!/usr/bin/env bash
# Batching across front ends, side by side in one run: keys/s and keys per
# gateway CPU-second for single-key reads vs 100-key batches over memcache
# (multi-get), REST (RonDB batch of pk-reads; KV _mget) and gRPC (KV MultiGet;
# RonDBREST Batch), on the embedded engine, with the same connections.
#
#   bench/api-compare.sh                  # TRIALS=3 TIME=5 CONNS=4 BATCH=100
#   BATCHES="1 10 100" bench/api-compare.sh   # more points for the keys/s vs batch plot
#
# Writes bench/results/api-compare.csv and prints a table. Needs only Go.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
TRIALS=${TRIALS:-${ROUNDS:-3}} # ROUNDS is its old name
TIME=${TIME:-5}
CONNS=${CONNS:-4}
BATCH=${BATCH:-100}
BATCHES=${BATCHES:-1 $BATCH}   # batch sizes run; the table compares 1 with $BATCH
KEYS=${KEYS:-100000}
PORTS=${PORTS:-22190}
MC=127.0.0.1:$PORTS; REST=127.0.0.1:$((PORTS+1)); GRPC=127.0.0.1:$((PORTS+2))
OUT=${OUT:-bench/results}
mkdir -p "$OUT" bin
go build -o bin/ndbgate ./cmd/ndbgate
go build -o bin/ndbgate-bench ./bench/cmd/ndbgate-bench

bin/ndbgate serve --memcache "$MC" --rest "$REST" --grpc "$GRPC" --log-level warn &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
wait_port "${MC#*:}" "${MC%:*}"
bin/ndbgate-bench -proto memcache-text -addr "$MC" -keys "$KEYS" -preload -duration 100ms -warmup 0 -quiet >/dev/null

csv=$OUT/api-compare.csv
echo "trial,proto,batch,keys_per_s,ops_per_s,p50_us,p99_us,server_cpu_s,keys_per_cpu_s" > "$csv"
cases=("memcache-text $MC" "memcache-binary $MC" "rest-pkread $REST" "rest-batch $REST" "rest-kv $REST" "grpc-kv $GRPC" "grpc-rondb $GRPC")
for trial in $(seq "$TRIALS"); do
  for c in "${cases[@]}"; do
    set -- $c
    for batch in $BATCHES; do
      [ "$1" = rest-pkread ] && [ "$batch" != 1 ] && continue   # rest-pkread is the single-request side of rest-batch
      [ "$1" = rest-batch ] && [ "$batch" = 1 ] && continue
      bin/ndbgate-bench -proto "$1" -addr "$2" -conns "$CONNS" -batch "$batch" -keys "$KEYS" -ratio 0:1 \
        -duration "${TIME}s" -warmup 500ms -server-pid "$PID" -quiet -json "$OUT/.run.json"
      python3 - "$trial" "$OUT/.run.json" >> "$csv" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); s = r.get("server") or {}
print(f'{sys.argv[1]},{r["proto"]},{r["batch"]},{r["keys_per_s"]:.0f},{r["ops_per_s"]:.0f},{r["latency_us"]["P50"]:.0f},{r["latency_us"]["P99"]:.0f},{s.get("cpu_s",0):.2f},{s.get("keys_per_cpu_s",0):.0f}')
PY
    done
  done
done
rm -f "$OUT/.run.json"
python3 bench/report.py
python3 - "$csv" "$BATCH" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
batch = sys.argv[2]
def med(proto, b, field):
    v = [float(r[field]) for r in rows if r["proto"] == proto and r["batch"] == b]
    return statistics.median(v) if v else 0
pairs = [("memcache text multi-get", "memcache-text", "memcache-text"), ("memcache binary GETKQ run", "memcache-binary", "memcache-binary"),
         ("REST RonDB batch vs pk-read", "rest-pkread", "rest-batch"), ("REST KV _mget vs GET", "rest-kv", "rest-kv"),
         ("gRPC KV MultiGet vs Get", "grpc-kv", "grpc-kv"), ("gRPC RonDBREST Batch vs PKRead", "grpc-rondb", "grpc-rondb")]
print(f"| front end | single: keys/s | batch {batch}: keys/s | ratio | single: keys/CPU-s | batch: keys/CPU-s |")
print("|---|---|---|---|---|---|")
for name, single, batched in pairs:
    a, b = med(single, "1", "keys_per_s"), med(batched, batch, "keys_per_s")
    ca, cb = med(single, "1", "keys_per_cpu_s"), med(batched, batch, "keys_per_cpu_s")
    print(f"| {name} | {a:,.0f} | {b:,.0f} | {b/a if a else 0:.1f}x | {ca:,.0f} | {cb:,.0f} |")
PY
