#!/usr/bin/env bash
# Side-by-side memtier_benchmark run: ndbgate (embedded engine) vs memcached,
# alternating A B A B in one invocation, with throughput and p99 ratios.
#
#   bench/memtier-compare.sh                    # memcache_text, the issue's workload
#   PROTO=memcache_binary ROUNDS=5 TIME=20 bench/memtier-compare.sh
#
# memtier_benchmark is not in Debian's packages: build it from its public source
# (RedisLabs/memtier_benchmark: autoreconf -ivf && ./configure && make) outside
# this repo and put it on PATH. memcached comes from Debian (apt-get install memcached).
set -euo pipefail
cd "$(dirname "$0")/.."

PROTO=${PROTO:-memcache_text}
ROUNDS=${ROUNDS:-3}
TIME=${TIME:-15}
THREADS=${THREADS:-2}
CONNS=${CONNS:-25}
RATIO=${RATIO:-1:10}
DATA=${DATA:-32}
KEYS=${KEYS:-100000}
PIPELINE=${PIPELINE:-1}
MC_PORT=${MC_PORT:-22122}
NG_PORT=${NG_PORT:-22123}
NG_ARGS=${NG_ARGS:-}   # extra ndbgate flags, e.g. "--partitions 256"
OUT=${OUT:-$(mktemp -d /tmp/ndbgate-bench.XXXXXX)}

for tool in memtier_benchmark memcached python3 go; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "memtier-compare: $tool is not on PATH." >&2
    [ "$tool" = memtier_benchmark ] && echo "  It is not in Debian's packages: build it from its public source (RedisLabs/memtier_benchmark) outside this repo and put it on PATH." >&2
    exit 2
  fi
done

go build -o "$OUT/ndbgate" ./cmd/ndbgate
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

user_flag=(); [ "$(id -u)" -eq 0 ] && user_flag=(-u root)
memcached -p "$MC_PORT" -U 0 -l 127.0.0.1 -t 2 -m 1024 -c 4096 "${user_flag[@]}" & pids+=($!)
"$OUT/ndbgate" serve --memcache "127.0.0.1:$NG_PORT" --rest "" --grpc "" --log-level warn ${NG_ARGS:-} & pids+=($!)
for port in "$MC_PORT" "$NG_PORT"; do
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
done

common=(-s 127.0.0.1 --protocol="$PROTO" --hide-histogram -d "$DATA" --key-maximum="$KEYS" --key-minimum=1)
for target in memcached:$MC_PORT ndbgate:$NG_PORT; do
  name=${target%%:*}; port=${target##*:}
  echo "preload $name: $KEYS keys"
  memtier_benchmark "${common[@]}" -p "$port" -t 1 -c 1 --ratio=1:0 --key-pattern=P:P --requests="$KEYS" >/dev/null 2>&1
done

run=(-t "$THREADS" -c "$CONNS" --ratio="$RATIO" --pipeline="$PIPELINE" --test-time="$TIME" --key-pattern=R:R --distinct-client-seed --randomize)
for round in $(seq "$ROUNDS"); do
  for target in ndbgate:$NG_PORT memcached:$MC_PORT; do
    name=${target%%:*}; port=${target##*:}
    echo "round $round: $name"
    memtier_benchmark "${common[@]}" -p "$port" "${run[@]}" --json-out-file="$OUT/$name-$round.json" >"$OUT/$name-$round.txt" 2>&1
  done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name, r):
    t = json.load(open(f"{out}/{name}-{r}.json"))["ALL STATS"]["Totals"]
    pct = t.get("Percentile Latencies", {})
    p99 = pct.get("p99.00") or pct.get("p99.0")
    return t["Ops/sec"], p99, pct.get("p50.00"), pct.get("p99.90")
rows = []
print(f"\n{'round':>5} {'ndbgate ops/s':>14} {'memcached ops/s':>16} {'ratio':>6} {'ndbgate p99 ms':>15} {'memcached p99 ms':>17}")
for r in range(1, rounds + 1):
    a, b = load("ndbgate", r), load("memcached", r)
    rows.append((a, b))
    print(f"{r:>5} {a[0]:>14.0f} {b[0]:>16.0f} {a[0]/b[0]:>6.2f} {a[1]:>15.3f} {b[1]:>17.3f}")
ratios = [a[0] / b[0] for a, b in rows]
p99r = [a[1] / b[1] for a, b in rows]
print(f"\nthroughput ratio ndbgate/memcached: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
print(f"p99 ratio ndbgate/memcached (lower is better): median {statistics.median(p99r):.2f} (min {min(p99r):.2f}, max {max(p99r):.2f})")
PY
echo "raw output: $OUT"
