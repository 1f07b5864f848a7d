#!/usr/bin/env bash
# Live-cluster benchmarks: ndbgate's NDB API driver against ndbmemcache (MySQL
# Cluster's own memcached engine) and flexAsynch (NDB's asynchronous NDB API
# benchmark), on the same data nodes and the same table
# (ndbmemcache.demo_table). Targets alternate within one run (A B A B). Every
# run also records the CPU seconds of the gateway, of the local data nodes
# (ndbd/ndbmtd) and of the whole host, so that throughput per CPU can be read
# beside throughput. Appends rows to $OUT/live.csv, then runs bench/report.py.
#
# It never builds NDB. It takes from the environment:
#   NDB_CONNECTSTRING  the management server, e.g. 127.0.0.1:1186 (required)
#   NDBGATE_NDB_BIN    ndbgate built with the NDB API driver (required;
#                      make build-ndb NDB_HOME=<NDB install> BIN=<path>)
#   NDBMEMCACHE_DIR    ndbmemcache's build directory, storage/ndb/memcache of a
#                      built MySQL Cluster tree, with ndb_engine.so and
#                      extra/memcached/memcached (group memtier)
#   FLEXASYNCH         the flexAsynch binary, storage/ndb/test/ndbapi (group flex)
#   NDB_LIB_DIR        where libndbclient is, if the loader does not find it
#   NDBGATE_NDB_BIN_B  optional: a second NDB build of ndbgate (another commit),
#                      run in every memtier and coalesce trial right after the
#                      first, as target ndbgate-b; the run ends with each
#                      workload's ndbgate-b / ndbgate ratio (a before and after)
#   memtier_benchmark on PATH (groups memtier, coalesce, pool), go (group api)
#   ITEM_STATE=1       give demo_table ndbgate's item_state column, where the
#                      meta protocol's item state lives (a read then writes
#                      the row once a minute and after each new version);
#                      by default the table has ndbmemcache's shape
#
# demo_table and ndbmemcache's configuration tables are dropped and made
# again at the start, so every run starts from the same empty table.
#
#   bench/live.sh                                   # every group, 3 trials of 10 s
#   WORKLOADS="memtier flex" TRIALS=5 bench/live.sh # named groups
#   MEMTIER="get1_p16" FLEX_THREADS=2 BATCHES=1 WORKLOADS="memtier flex" bench/live.sh
#                                                   # reads against flexAsynch only
#
# Groups:
#   memtier   memtier against ndbgate and ndbmemcache: 1:10 with 32 B values at
#             pipeline 1 and 16 (16 connections), 1 connection, and single
#             gets (pipeline 1 and 16), 10-key and 100-key gets; and large
#             values (LARGE_SIZE bytes, 20,000 by default, over LARGE_KEYS
#             keys, 1,000) under the b: prefix, 1:1, on 1 connection
#             (large_c1) and 16 (large_p1)
#   api       REST and gRPC reads of 1, 10 and 100 keys per request
#             (ndbgate-bench, 4 connections)
#   coalesce  64 memtier clients, 1:10, dispatcher coalescing on and off
#   pool      1:10 at pipeline 1 and 16 with 1, 2 and 4 cluster connections
#   flex      flexAsynch reads of 1, 10 and 100 operations per transaction,
#             1 and 2 threads: what one NDB API process gets from these nodes
#   likeflex  100-key reads like for like with flexAsynch's (2 threads, 100
#             reads a transaction), alternated: ndbgate on a table of
#             flexAsynch's shape (bench.flexlike: a VARBINARY(32) key, one
#             32-byte value), each connection reading its own key range in
#             sequence as each flexAsynch thread does (memtier P:P), and in
#             random order; and on demo_table (VARCHAR(250) key) in both
#             orders. Then single keys alike, alternated: memtier gets at
#             pipeline 16 (2 x 8 connections) on bench.flexlike in sequence
#             against flexAsynch's one-read transactions (2 threads)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

WORKLOADS=${WORKLOADS:-memtier api coalesce pool flex}
TRIALS=${TRIALS:-${ROUNDS:-3}} # ROUNDS is its old name
TIME=${TIME:-10}
KEYS=${KEYS:-100000}
PORT=${PORT:-22330}
OUT=${OUT:-bench/results}
FLEX_THREADS=${FLEX_THREADS:-1 2}
BATCHES=${BATCHES:-1 10 100}
MEMTIER=${MEMTIER:-} # memtier workloads to run, by name; empty: all
LARGE_KEYS=${LARGE_KEYS:-1000}   # keys of the large-value workloads
LARGE_SIZE=${LARGE_SIZE:-20000}  # their values' bytes (parts of 13,950)

# --- what is needed, and what is missing ---------------------------------------
[ -n "${NDB_LIB_DIR:-}" ] && export LD_LIBRARY_PATH="$NDB_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=()
want() { case " $WORKLOADS " in *" $1 "*) return 0 ;; esac; return 1; }
for g in $WORKLOADS; do
  case $g in memtier | api | coalesce | pool | flex | likeflex) ;;
    *) echo "live: unknown group '$g' (memtier api coalesce pool flex likeflex)" >&2; exit 2 ;;
  esac
done
[ -n "${NDB_CONNECTSTRING:-}" ] || missing+=("NDB_CONNECTSTRING: the cluster's management server, host:1186")
if [ -z "${NDBGATE_NDB_BIN:-}" ] || [ ! -x "$NDBGATE_NDB_BIN" ]; then
  missing+=("NDBGATE_NDB_BIN: ndbgate built with the NDB API driver (make build-ndb NDB_HOME=... BIN=...)")
elif ! "$NDBGATE_NDB_BIN" version 2>&1 | grep -q ndbapi; then
  missing+=("NDBGATE_NDB_BIN=$NDBGATE_NDB_BIN does not run, or lacks the ndbapi driver: $("$NDBGATE_NDB_BIN" version 2>&1 | head -1)")
fi
if [ -n "${NDBGATE_NDB_BIN_B:-}" ] && ! "$NDBGATE_NDB_BIN_B" version 2>&1 | grep -q ndbapi; then
  missing+=("NDBGATE_NDB_BIN_B=$NDBGATE_NDB_BIN_B does not run, or lacks the ndbapi driver")
fi
if want memtier; then
  if [ -z "${NDBMEMCACHE_DIR:-}" ] || [ ! -x "$NDBMEMCACHE_DIR/extra/memcached/memcached" ] || [ ! -f "$NDBMEMCACHE_DIR/ndb_engine.so" ]; then
    missing+=("NDBMEMCACHE_DIR: storage/ndb/memcache of a built MySQL Cluster tree, holding ndb_engine.so and extra/memcached/memcached")
  fi
fi
if { want flex || want likeflex; } && { [ -z "${FLEXASYNCH:-}" ] || [ ! -x "$FLEXASYNCH" ]; }; then
  missing+=("FLEXASYNCH: the flexAsynch binary (storage/ndb/test/ndbapi of a built MySQL Cluster tree)")
fi
if (want memtier || want coalesce || want pool || want likeflex) && ! command -v memtier_benchmark >/dev/null 2>&1; then
  missing+=("memtier_benchmark on PATH (not in Debian; see bench/run-memtier.sh for its source and build)")
fi
want api && ! command -v go >/dev/null 2>&1 && missing+=("go, to build bench/cmd/ndbgate-bench")
if [ ${#missing[@]} -gt 0 ]; then
  echo "live: missing, for WORKLOADS=\"$WORKLOADS\":" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  echo "live: this script never builds NDB; see bench/README.md, \"Live cluster\"." >&2
  exit 2
fi

mkdir -p "$OUT" bin
tmp=$(mktemp -d /tmp/ndbgate-live.XXXXXX)
gw_pid=""; nm_pid=""
stop() { # stop a server, by pid variable name
  local p=${!1}
  [ -n "$p" ] && { kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; }
  printf -v "$1" '%s' ""
}
cleanup() { stop gw_pid; stop nm_pid; rm -rf "$tmp"; }
trap cleanup EXIT

CS=$NDB_CONNECTSTRING
NG=$PORT; NGREST=$((PORT + 1)); NGGRPC=$((PORT + 2)); NM=$((PORT + 3))

# ndbgate on the cluster: pool size, then extra flags. GW_BIN picks the build.
GW_BIN=$NDBGATE_NDB_BIN
start_ndbgate() {
  stop gw_pid
  "$GW_BIN" serve --ndb-connectstring "$CS" --ndb-pool-size "$1" --memcache "127.0.0.1:$NG" \
    --rest "127.0.0.1:$NGREST" --grpc "127.0.0.1:$NGGRPC" --log-level warn "${@:2}" >"$tmp/ndbgate.log" 2>&1 &
  gw_pid=$!
  wait_ready "$gw_pid" "$NGREST" "$tmp/ndbgate.log" live || exit 1
}

start_ndbmemcache() {
  local user=(); [ "$(id -u)" -eq 0 ] && user=(-u root)
  "$NDBMEMCACHE_DIR/extra/memcached/memcached" "${user[@]}" -E "$NDBMEMCACHE_DIR/ndb_engine.so" \
    -e "connectstring=$CS;role=db-only" -l 127.0.0.1 -p "$NM" -U 0 -t 2 >"$tmp/ndbmemcache.log" 2>&1 &
  nm_pid=$!
  wait_port "$NM" || { echo "live: ndbmemcache did not start:" >&2; tail -5 "$tmp/ndbmemcache.log" >&2; exit 1; }
}

# --- CPU accounting ------------------------------------------------------------
CLK=$(getconf CLK_TCK)
ticks() { # user+system clock ticks of the given pids
  local t=0 p n
  for p in "$@"; do
    n=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13} END {if (NR == 0) print 0}')
    t=$((t + n))
  done
  echo "$t"
}
host_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
data_node_pids() { pgrep -x 'ndbd|ndbmtd' | tr '\n' ' '; }
DATA_NODES=$(data_node_pids)
[ -n "$DATA_NODES" ] || echo "live: no ndbd/ndbmtd process on this host: data node CPU is not recorded" >&2

# measured GWPID CMD...: runs CMD, setting SECS, GW_CPU, NDBD_CPU and HOST_CPU.
measured() {
  local gw=$1; shift
  local g0 d0 h0 t0 t1 rc=0
  # shellcheck disable=SC2086
  g0=$(ticks $gw); d0=$(ticks $DATA_NODES); h0=$(host_ticks); t0=$(date +%s%N)
  "$@" || rc=$?
  t1=$(date +%s%N)
  # shellcheck disable=SC2086
  GW_CPU=$(awk -v a="$(ticks $gw)" -v b="$g0" -v c="$CLK" 'BEGIN {printf "%.2f", (a - b) / c}')
  # shellcheck disable=SC2086
  NDBD_CPU=$(awk -v a="$(ticks $DATA_NODES)" -v b="$d0" -v c="$CLK" 'BEGIN {printf "%.2f", (a - b) / c}')
  HOST_CPU=$(awk -v a="$(host_ticks)" -v b="$h0" -v c="$CLK" 'BEGIN {printf "%.2f", (a - b) / c}')
  SECS=$(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.2f", (a - b) / 1e9}')
  return $rc
}

csv=$OUT/live.csv
[ -f "$csv" ] || echo "date,group,workload,target,config,batch,trial,ops_per_s,keys_per_s,hit_ratio,p50_ms,p99_ms,p999_ms,secs,gw_cpu_s,ndbd_cpu_s,host_cpu_s" >"$csv"
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
row() { # group workload target config batch trial ops keys hit p50 p99 p999
  echo "$stamp,$1,$2,$3,$4,$5,$6,$7,$8,$9,${10},${11},${12},$SECS,$GW_CPU,$NDBD_CPU,$HOST_CPU" >>"$csv"
  printf '  %-22s %-12s %-14s r%s: %s ops/s, %s keys/s, p99 %s ms; CPU s: gateway %s, data nodes %s, host %s in %s s\n' \
    "$2" "$3" "$4" "$6" "$7" "$8" "${11}" "$GW_CPU" "$NDBD_CPU" "$HOST_CPU" "$SECS"
}

# run_memtier GROUP WORKLOAD TARGET CONFIG BATCH TRIAL PID PORT ARGS...: one measured run.
run_memtier() {
  local group=$1 name=$2 target=$3 config=$4 batch=$5 trial=$6 pid=$7 port=$8
  shift 8
  # memtier waits for ever after an error reply (README.md): bounded.
  local rc=0
  measured "$pid" timeout "$((TIME * 2 + 30))" memtier_benchmark -s 127.0.0.1 -p "$port" --protocol=memcache_text --hide-histogram \
    -d 32 --key-minimum=1 --key-maximum="$KEYS" --test-time="$TIME" --key-pattern="${KEY_PATTERN:-R:R}" \
    --distinct-client-seed --randomize --json-out-file="$tmp/run.json" "$@" >"$tmp/run.txt" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "live: $name trial $trial $target failed (exit $rc; 124: memtier stalled, as it does after an error reply):" >&2; tail -5 "$tmp/run.txt" >&2
    [ "$target" = ndbmemcache ] && { echo "live: ndbmemcache's log:" >&2; tail -5 "$tmp/ndbmemcache.log" >&2; }
    return 0
  fi
  local fields
  # memtier's own rates divide by a misreported duration (memtier_json.py).
  fields=$(python3 bench/memtier_json.py "$tmp/run.json" "$TIME" "$batch")
  # shellcheck disable=SC2086
  row "$group" "$name" "$target" "$config" "$batch" "$trial" $fields
}

preload() { # every key once, through ndbgate, so that both gateways read the same rows
  memtier_preload "$NG" "$KEYS" --protocol=memcache_text -d 32 -t 2 -c 4 --pipeline=16 --key-minimum=1 >"$tmp/preload.txt" 2>&1 ||
    { echo "live: preload failed:" >&2; tail -5 "$tmp/preload.txt" >&2; exit 1; }
  settle
}

settle() { # up to 60 s for the data nodes to go quiet (below 10 % of a core) after a load
  [ -n "$DATA_NODES" ] || return 0
  local a b
  for _ in $(seq 60); do
    # shellcheck disable=SC2086
    a=$(ticks $DATA_NODES); sleep 1; b=$(ticks $DATA_NODES)
    [ $((b - a)) -le $((CLK / 10)) ] && return 0
  done
}

echo "live: cluster $CS; data node pids: ${DATA_NODES:-none here}; results in $csv"
host_line
# ndbmemcache's configuration tables, and demo_table, made afresh: a table
# left by the live e2e suite has the item_state column.
shape="ndbmemcache's shape"
[ "${ITEM_STATE:-}" = 1 ] && shape="with the item_state column"
echo "live: demo_table made afresh, $shape"
# shellcheck disable=SC2046
"$NDBGATE_NDB_BIN" ndb-create-tables --ndb-connectstring "$CS" --ndbmemcache-config --recreate \
  $([ "${ITEM_STATE:-}" = 1 ] && echo --item-state) $(want likeflex && echo --config bench/likeflex.yaml) >"$tmp/tables.txt" 2>&1 ||
  { echo "live: ndb-create-tables failed:" >&2; cat "$tmp/tables.txt" >&2; exit 1; }

# The ndbgate builds each trial runs: target name and binary.
BUILDS=("ndbgate $NDBGATE_NDB_BIN")
[ -n "${NDBGATE_NDB_BIN_B:-}" ] && BUILDS+=("ndbgate-b $NDBGATE_NDB_BIN_B")

# --- memtier: ndbgate against ndbmemcache ----------------------------------------
if want memtier; then
  start_ndbgate 2
  preload
  # Each run starts its gateway afresh and stops it after: once loaded,
  # ndbmemcache 7.5.0 keeps two threads spinning when idle, which would slow
  # whatever runs next on these 2 cores.
  stop gw_pid
  # name ratio pipeline threads conns-per-thread batch
  # get1_p16 is the like-for-like of flexAsynch's single reads: reads only,
  # many in flight.
  for w in "set1:get10_p1 1:10 1 2 8 1" "set1:get10_p16 1:10 16 2 8 1" "set1:get10_p1_c1 1:10 1 1 1 1" \
    "get1 0:1 1 2 8 1" "get1_p16 0:1 16 2 8 1" "mget10 0:10 1 2 8 10" "mget100 0:100 1 2 8 100"; do
    read -r name ratio pl threads conns batch <<<"$w"
    [ -n "$MEMTIER" ] && case " $MEMTIER " in *" $name "*) ;; *) continue ;; esac
    extra=(); [ "$batch" -gt 1 ] && extra=(--multi-key-get="$batch")
    for trial in $(seq "$TRIALS"); do
      for b in "${BUILDS[@]}"; do
        read -r target GW_BIN <<<"$b"
        start_ndbgate 2
        run_memtier memtier "$name" "$target" pool=2 "$batch" "$trial" "$gw_pid" "$NG" \
          -t "$threads" -c "$conns" --ratio="$ratio" --pipeline="$pl" "${extra[@]}"
        stop gw_pid
      done
      GW_BIN=$NDBGATE_NDB_BIN
      start_ndbmemcache
      run_memtier memtier "$name" ndbmemcache threads=2 "$batch" "$trial" "$nm_pid" "$NM" \
        -t "$threads" -c "$conns" --ratio="$ratio" --pipeline="$pl" "${extra[@]}"
      stop nm_pid
    done
  done

  # Large values: LARGE_SIZE-byte values under ndbmemcache's b: prefix
  # (container demo_ext, parts in external_values), 1:1, each set over a
  # stored value, so a set frees the old parts. Both serve role db-only.
  large=(--ndbmemcache-role db-only)
  for w in "large_c1 1 1" "large_p1 2 8"; do
    read -r name threads conns <<<"$w"
    [ -n "$MEMTIER" ] && case " $MEMTIER " in *" $name "*) ;; *) continue ;; esac
    if [ -z "${large_loaded:-}" ]; then
      start_ndbgate 2 "${large[@]}"
      memtier_preload "$NG" "$LARGE_KEYS" --protocol=memcache_text -d "$LARGE_SIZE" --key-prefix=b: -t 2 -c 2 --key-minimum=1 \
        >"$tmp/preload.txt" 2>&1 || { echo "live: large preload failed:" >&2; tail -5 "$tmp/preload.txt" >&2; exit 1; }
      stop gw_pid
      settle
      large_loaded=1
    fi
    lw=(-t "$threads" -c "$conns" --ratio=1:1 --pipeline=1 -d "$LARGE_SIZE" --key-prefix=b: --key-maximum="$LARGE_KEYS")
    for trial in $(seq "$TRIALS"); do
      for b in "${BUILDS[@]}"; do
        read -r target GW_BIN <<<"$b"
        start_ndbgate 2 "${large[@]}"
        run_memtier memtier "$name" "$target" pool=2 1 "$trial" "$gw_pid" "$NG" "${lw[@]}"
        stop gw_pid
      done
      GW_BIN=$NDBGATE_NDB_BIN
      start_ndbmemcache
      run_memtier memtier "$name" ndbmemcache threads=2 1 "$trial" "$nm_pid" "$NM" "${lw[@]}"
      stop nm_pid
    done
  done
fi

# --- REST and gRPC: single keys against batches ----------------------------------
if want api; then
  go build -o bin/ndbgate-bench ./bench/cmd/ndbgate-bench
  start_ndbgate 2
  want memtier || preload
  for trial in $(seq "$TRIALS"); do
   for b in "${BUILDS[@]}"; do
    read -r target GW_BIN <<<"$b"
    start_ndbgate 2
    for c in "rest-pkread $NGREST" "rest-batch $NGREST" "rest-kv $NGREST" "grpc-kv $NGGRPC" "grpc-rondb $NGGRPC"; do
      read -r proto addr <<<"$c"
      for batch in $BATCHES; do
        [ "$proto" = rest-pkread ] && [ "$batch" != 1 ] && continue # the single-request side of rest-batch
        [ "$proto" = rest-batch ] && [ "$batch" = 1 ] && continue
        if ! measured "$gw_pid" bin/ndbgate-bench -proto "$proto" -addr "127.0.0.1:$addr" -conns 4 -batch "$batch" \
          -keys "$KEYS" -ratio 0:1 -duration "${TIME}s" -warmup 0 -quiet -json "$tmp/run.json" >"$tmp/run.txt" 2>&1; then
          echo "live: $proto batch $batch failed:" >&2; tail -5 "$tmp/run.txt" >&2; continue
        fi
        # shellcheck disable=SC2046
        row api "$proto" "$target" pool=2 "$batch" "$trial" $(python3 - "$tmp/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latency_us"]
hit = r["hits"] / (r["hits"] + r["misses"]) if r["hits"] + r["misses"] else 0
if r["errors"]:
    print(f'live: {r["errors"]} errors, first: {r.get("first_error")}', file=sys.stderr)
print(f'{r["ops_per_s"]:.0f} {r["keys_per_s"]:.0f} {hit:.3f} {l["P50"]/1000:.3f} {l["P99"]/1000:.3f} {l["P999"]/1000:.3f}')
PY
)
      done
    done
   done
   GW_BIN=$NDBGATE_NDB_BIN
  done
  stop gw_pid
fi

# --- coalescing on and off, 64 clients -------------------------------------------
if want coalesce; then
  printf 'dispatch:\n  coalesce: false\n' >"$tmp/coalesce-off.yaml"
  printf 'dispatch:\n  coalesce: true\n' >"$tmp/coalesce-on.yaml"
  for trial in $(seq "$TRIALS"); do
    for mode in on off; do
      for b in "${BUILDS[@]}"; do
        read -r target GW_BIN <<<"$b"
        start_ndbgate 2 --config "$tmp/coalesce-$mode.yaml"
        [ "$trial$mode$target" = 1onndbgate ] && ! want memtier && ! want api && preload
        run_memtier coalesce set1:get10_p1_c64 "$target" "coalesce=$mode" 1 "$trial" "$gw_pid" "$NG" \
          -t 2 -c 32 --ratio=1:10 --pipeline=1
      done
      GW_BIN=$NDBGATE_NDB_BIN
    done
  done
fi

# --- cluster connections in the pool -----------------------------------------------
if want pool; then
  for trial in $(seq "$TRIALS"); do
    for pool in 1 2 4; do
      start_ndbgate "$pool"
      [ "$trial$pool" = 11 ] && ! want memtier && ! want api && ! want coalesce && preload
      for pl in 1 16; do
        run_memtier pool "set1:get10_p$pl" ndbgate "pool=$pool" 1 "$trial" "$gw_pid" "$NG" \
          -t 2 -c 8 --ratio=1:10 --pipeline="$pl"
      done
    done
  done
fi
stop gw_pid

# --- flexAsynch: the NDB API ceiling for one client process ------------------------
export NDB_CONNECTSTRING=$CS
# flex_args THREADS BATCH: 32 transactions in flight per thread, 32 B values
# (one 8-word attribute), about 320,000 rows per thread whatever the batch.
flex_args() { args=(-t "$1" -p 32 -o $((10000 / $2)) -c "$2" -a 2 -s 8 -n); }
flex_load() {
  (cd "$tmp" && "$FLEXASYNCH" "${args[@]}" -create_table >flex.txt 2>&1 &&
    "$FLEXASYNCH" "${args[@]}" -insert -no_table_create >>flex.txt 2>&1) ||
    { echo "live: flexAsynch ${args[*]} could not load its table:" >&2; tail -5 "$tmp/flex.txt" >&2; return 1; }
}
flex_drop() { (cd "$tmp" && "$FLEXASYNCH" "${args[@]}" -drop_table >/dev/null 2>&1) || true; }
# run_flex GROUP WORKLOAD THREADS BATCH TRIAL: one measured read run, with
# the table flex_load made.
run_flex() {
  # flexAsynch is its own client: its CPU (warm-up and cool-down
  # included) stands where a gateway's would, read from bash's times.
  if ! measured "" bash -c 'cd "$1" && shift && "$@" >flex.txt 2>&1; rc=$?; times >times.txt; exit $rc' _ \
    "$tmp" "$FLEXASYNCH" "${args[@]}" -read -dirty -no_table_create -warmup_time 1 -execution_time "$TIME" -cooldown_time 1; then
    echo "live: flexAsynch read failed:" >&2; tail -5 "$tmp/flex.txt" >&2; return 0
  fi
  GW_CPU=$(awk 'NR == 2 {t = 0; for (i = 1; i <= 2; i++) {split($i, a, /[ms]/); t += a[1] * 60 + a[2]}; printf "%.2f", t}' "$tmp/times.txt")
  local tps
  tps=$(awk '/Total transactions per second/ {print $NF}' "$tmp/flex.txt")
  [ -n "$tps" ] || { echo "live: no result from flexAsynch:" >&2; tail -5 "$tmp/flex.txt" >&2; return 0; }
  row "$1" "$2" flexAsynch "threads=$3" "$4" "$5" "$tps" $((tps * $4)) "" "" "" ""
}

if want flex; then
  for threads in $FLEX_THREADS; do
    for batch in $BATCHES; do
      flex_args "$threads" "$batch"
      flex_load || continue
      for trial in $(seq "$TRIALS"); do
        run_flex flex "reads_t$threads" "$threads" "$batch" "$trial"
      done
      flex_drop
    done
  done
fi

# --- 100-key reads, like for like with flexAsynch -------------------------------------
if want likeflex; then
  start_ndbgate 2 --config bench/likeflex.yaml
  preload # through the flex container: bench.flexlike
  stop gw_pid
  want memtier || want api || want coalesce || want pool || { start_ndbgate 2; preload; stop gw_pid; }
  flex_args 2 100
  if flex_load; then
    for trial in $(seq "$TRIALS"); do
      run_flex likeflex mget100 2 100 "$trial"
      for run in "flexlike P:P" "flexlike R:R" "demo_table P:P" "demo_table R:R"; do
        read -r table pattern <<<"$run"
        if [ "$table" = flexlike ]; then start_ndbgate 2 --config bench/likeflex.yaml; else start_ndbgate 2; fi
        KEY_PATTERN=$pattern run_memtier likeflex "mget100" ndbgate "table=$table keys=$pattern" 100 "$trial" "$gw_pid" "$NG" \
          -t 2 -c 8 --ratio=0:100 --pipeline=1 --multi-key-get=100
        stop gw_pid
      done
    done
    flex_drop
  fi
  # Single keys: flexAsynch keys its rows by transaction and op, so one read
  # a transaction needs a table loaded with those arguments.
  flex_args 2 1
  if flex_load; then
    for trial in $(seq "$TRIALS"); do
      run_flex likeflex get1 2 1 "$trial"
      start_ndbgate 2 --config bench/likeflex.yaml
      KEY_PATTERN=P:P run_memtier likeflex get1_p16 ndbgate "table=flexlike keys=P:P" 1 "$trial" "$gw_pid" "$NG" \
        -t 2 -c 8 --ratio=0:1 --pipeline=16
      stop gw_pid
    done
    flex_drop
  fi
fi
python3 bench/report.py
if [ -n "${NDBGATE_NDB_BIN_B:-}" ]; then
  python3 bench/report.py --builds "$csv" "$stamp"
fi
