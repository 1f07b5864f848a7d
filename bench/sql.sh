#!/usr/bin/env bash
# The SQL baseline: primary-key reads and writes through a MySQL server
# (sysbench, prepared statements) against ndbgate's memcache, REST and gRPC
# paths, on the same table made in SQL (bench.kv: a VARCHAR(250) key and a
# VARBINARY(1024) value), the same data nodes and the same host. Targets
# alternate within each trial. Every run records throughput, p99, and the
# host's busy CPU seconds, so ops per host CPU-second compare the whole
# stack (server + data nodes + client) of each path. This is where the
# claim that the NDB API is 3-6x faster than SQL is checked.
#
# It never builds NDB or MySQL. It takes from the environment:
#   NDB_CONNECTSTRING  the management server, e.g. 127.0.0.1:1186 (required)
#   NDBGATE_NDB_BIN    ndbgate built with the NDB API driver (required)
#   MYSQL_SOCKET       the mysqld's socket on the same cluster (required), user root
#   MYSQL_CLIENT       the mysql client (default: mysql on PATH)
#   sysbench on PATH (Debian's package), go (to build ndbgate-bench)
#
#   TRIALS=5 TIME=10 THREADS=16 bench/sql.sh
#
# Writes $OUT/sql.csv (one row per run) and $OUT/sql.png (with gnuplot),
# and prints medians and ratios per workload.
set -euo pipefail
cd "$(dirname "$0")/.."

TRIALS=${TRIALS:-${ROUNDS:-5}} # ROUNDS is its old name
TIME=${TIME:-10}
THREADS=${THREADS:-16}
KEYS=${KEYS:-100000}
VALUE=${VALUE:-32}
PORT=${PORT:-22360}
OUT=${OUT:-bench/results}
MYSQL_CLIENT=${MYSQL_CLIENT:-mysql}

missing=()
[ -n "${NDB_CONNECTSTRING:-}" ] || missing+=("NDB_CONNECTSTRING: the cluster's management server")
[ -x "${NDBGATE_NDB_BIN:-}" ] || missing+=("NDBGATE_NDB_BIN: ndbgate built with the NDB API driver (make build-ndb)")
[ -S "${MYSQL_SOCKET:-}" ] || missing+=("MYSQL_SOCKET: the socket of a mysqld attached to the same cluster")
command -v sysbench >/dev/null 2>&1 || missing+=("sysbench (apt-get install sysbench)")
command -v "${MYSQL_CLIENT%% *}" >/dev/null 2>&1 || missing+=("MYSQL_CLIENT: the mysql client")
command -v go >/dev/null 2>&1 || missing+=("go, to build bench/cmd/ndbgate-bench")
if [ ${#missing[@]} -gt 0 ]; then
  echo "sql: cannot run; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 2
fi

sql() { $MYSQL_CLIENT -uroot -S "$MYSQL_SOCKET" --default-character-set=utf8mb4 -N -B "$@"; }
mkdir -p "$OUT" bin
go build -o bin/ndbgate-bench ./bench/cmd/ndbgate-bench
tmp=$(mktemp -d)
gw_pid=
cleanup() { [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# The table, made in SQL as a user's would be, and filled once.
sql -e "CREATE DATABASE IF NOT EXISTS bench; DROP TABLE IF EXISTS bench.kv;
  CREATE TABLE bench.kv (mkey VARCHAR(250) NOT NULL PRIMARY KEY, string_value VARBINARY(1024)) ENGINE=NDBCLUSTER;"

cat >"$tmp/ndbgate.yaml" <<EOF
containers:
  - name: kv
    database: bench
    table: kv
    key_columns: [mkey]
    value_columns: [string_value]
key_prefixes:
  - prefix: ""
    container: kv
EOF
MC=127.0.0.1:$PORT REST=127.0.0.1:$((PORT + 1)) GRPC=127.0.0.1:$((PORT + 2))
"$NDBGATE_NDB_BIN" serve --config "$tmp/ndbgate.yaml" --ndb-connectstring "$NDB_CONNECTSTRING" \
  --memcache "$MC" --rest "$REST" --grpc "$GRPC" --log-level warn >"$tmp/ndbgate.log" 2>&1 &
gw_pid=$!
for _ in $(seq 600); do
  curl -fsS "http://$REST/readyz" >/dev/null 2>&1 && break
  kill -0 "$gw_pid" 2>/dev/null || { echo "sql: ndbgate did not start:" >&2; tail -5 "$tmp/ndbgate.log" >&2; exit 1; }
  sleep 0.05
done
bin/ndbgate-bench -proto memcache-text -addr "$MC" -keys "$KEYS" -value-size "$VALUE" -preload -duration 100ms -warmup 0 -quiet >/dev/null

# sysbench: one prepared statement per thread, random keys of the same key space.
cat >"$tmp/kv.lua" <<'EOF'
sysbench.cmdline.options = {
  keys = {"key space", 100000}, write = {"write instead of read", false}, value = {"value bytes", 32},
}
function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  if sysbench.opt.write then
    stmt = con:prepare("INSERT INTO kv (mkey, string_value) VALUES (?, ?) ON DUPLICATE KEY UPDATE string_value = VALUES(string_value)")
    val = stmt:bind_create(sysbench.sql.type.VARCHAR, 1024)
  else
    stmt = con:prepare("SELECT string_value FROM kv WHERE mkey = ?")
  end
  key = stmt:bind_create(sysbench.sql.type.VARCHAR, 250)
  if sysbench.opt.write then stmt:bind_param(key, val) else stmt:bind_param(key) end
  payload = string.rep("x", sysbench.opt.value)
end
function event()
  key:set("memtier-" .. sysbench.rand.uniform(1, sysbench.opt.keys))
  if sysbench.opt.write then val:set(payload) end
  stmt:execute()
end
EOF

host_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
CLK=$(getconf CLK_TCK)
csv=$OUT/sql.csv
[ -f "$csv" ] || echo "trial,workload,path,ops_per_s,p99_ms,host_cpu_s,ops_per_host_cpu_s" >"$csv"

# run WORKLOAD PATH: one measured run; appends a CSV row.
run() {
  local workload=$1 path=$2 before after ops p99 cpu ratio proto
  before=$(host_ticks)
  if [ "$path" = sql ]; then
    local write=false; [ "$workload" = write ] && write=true
    sysbench "$tmp/kv.lua" --db-driver=mysql --mysql-socket="$MYSQL_SOCKET" --mysql-user=root --mysql-db=bench \
      --threads="$THREADS" --time="$TIME" --percentile=99 --keys="$KEYS" --write="$write" --value="$VALUE" run >"$tmp/run.out" 2>&1
    after=$(host_ticks)
    ops=$(awk '/transactions:/ {gsub(/[(]/, "", $3); print $3}' "$tmp/run.out")
    p99=$(awk '/99th percentile:/ {print $3}' "$tmp/run.out")
  else
    case $path in memcache) proto=memcache-text addr=$MC ;; rest) proto=rest-pkread addr=$REST ;; grpc) proto=grpc-rondb addr=$GRPC ;; esac
    local ratio=0:1; [ "$workload" = write ] && ratio=1:0
    bin/ndbgate-bench -proto "$proto" -addr "$addr" -conns "$THREADS" -keys "$KEYS" -value-size "$VALUE" -ratio "$ratio" \
      -db bench -table kv -key-column mkey -value-column string_value -container kv \
      -duration "${TIME}s" -warmup 1s -quiet -json "$tmp/run.json" >/dev/null
    after=$(host_ticks)
    ops=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ops_per_s"])' "$tmp/run.json")
    p99=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["latency_us"]["P99"]/1000)' "$tmp/run.json")
  fi
  cpu=$(awk -v t=$((after - before)) -v c="$CLK" 'BEGIN {printf "%.2f", t / c}')
  ratio=$(awk -v o="$ops" -v t="$TIME" -v c="$cpu" 'BEGIN {printf "%.0f", o * t / c}')
  echo "$trial,$workload,$path,$ops,$p99,$cpu,$ratio" >>"$csv"
  printf '  %-5s %-8s %10.0f ops/s  p99 %7.3f ms  %8s ops/host-CPU-s\n' "$workload" "$path" "$ops" "$p99" "$ratio"
}

for trial in $(seq "$TRIALS"); do
  echo "trial $trial"
  for workload in read write; do
    for path in sql memcache rest grpc; do
      run "$workload" "$path"
    done
  done
done

python3 - "$csv" "$TRIALS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))[-int(sys.argv[2]) * 8:]
by = {}
for r in rows:
    by.setdefault((r["workload"], r["path"]), []).append(r)
print("\nworkload path      ops/s (median, min-max)       p99 ms   ops/host-CPU-s   x SQL (ops/s)  x SQL (per CPU)")
for (w, p), rs in sorted(by.items()):
    ops = [float(r["ops_per_s"]) for r in rs]; cpu = [float(r["ops_per_host_cpu_s"]) for r in rs]
    p99 = statistics.median(float(r["p99_ms"]) for r in rs)
    base = by[(w, "sql")]
    bo = statistics.median(float(r["ops_per_s"]) for r in base); bc = statistics.median(float(r["ops_per_host_cpu_s"]) for r in base)
    print(f"{w:8} {p:9} {statistics.median(ops):9.0f} ({min(ops):.0f}-{max(ops):.0f})  {p99:8.3f}  {statistics.median(cpu):14.0f}  {statistics.median(ops)/bo:12.2f}x  {statistics.median(cpu)/bc:12.2f}x")
EOF

if command -v gnuplot >/dev/null 2>&1; then
  python3 - "$csv" "$TRIALS" >"$tmp/plot.dat" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))[-int(sys.argv[2]) * 8:]
by = {}
for r in rows:
    by.setdefault((r["workload"], r["path"]), []).append(float(r["ops_per_host_cpu_s"]))
for p in ["sql", "memcache", "rest", "grpc"]:
    print(p, statistics.median(by[("read", p)]), statistics.median(by[("write", p)]))
EOF
  gnuplot <<EOF
set terminal pngcairo size 800,450
set output "$OUT/sql.png"
set title "Primary-key reads and writes per host CPU-second: SQL (mysqld, prepared) vs ndbgate"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "ops per host CPU-second"
set yrange [0:*]
set key top left
plot "$tmp/plot.dat" using 2:xtic(1) title "read", "" using 3 title "write"
EOF
  echo "plot: $OUT/sql.png"
fi
