#!/usr/bin/env bash
# One connection, one request at a time, by command: each ndbgate build
# given, then ndbmemcache, alternated within each trial, on a live cluster.
# Per run it prints requests/s, memtier's p50 and p99 for all requests and
# for sets and gets apart, and the local data nodes' context switches and
# CPU µs a request (perf stat over the run). A whole-run p99 at 1:10 lies
# in the sets' upper tail, so the split says where a difference is.
#
# It never builds NDB, and does not make tables: it serves ndbmemcache's
# configuration (role db-only) as the cluster holds it, so run it after
# live.sh or with mysqld-made ndbmemcache tables.
#
#   NDB_CONNECTSTRING  the management server, e.g. 127.0.0.1:1186 (required)
#   NDB_LIB_DIR        where libndbclient is, if the loader does not find it
#   NDBMEMCACHE_DIR    storage/ndb/memcache of a built MySQL Cluster tree
#                      (ndb_engine.so, extra/memcached/memcached); unset:
#                      the ndbgate builds only
#   MODE               small (default): 32-byte values, 1:10, keys 1-100000;
#                      large: 20,000-byte values under the b: prefix
#                      (ndbmemcache's parts), 1:1, keys 1-1000;
#                      large_gets: the same keys stored first, gets only
#   TRIALS (5), TIME (seconds a run, 8)
#   memtier_benchmark on PATH; perf for the data nodes' figures
#
# A build may be a wrapper script that sets an environment variable and
# runs a binary with "$@", to compare settings.
#
#   NDB_CONNECTSTRING=127.0.0.1:1186 NDB_LIB_DIR=/opt/ndb/lib \
#     NDBMEMCACHE_DIR=/opt/ndbbuild/storage/ndb/memcache bench/by-command.sh /tmp/ndbgate-ndb
# Measure only on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

TRIALS=${TRIALS:-5} TIME=${TIME:-8} MODE=${MODE:-small}
PORT=22340 REST=22341 GRPC=22342
[ $# -ge 1 ] || { echo "usage: $0 NDB_BUILD..." >&2; exit 2; }
[ -n "${NDB_CONNECTSTRING:-}" ] || { echo "by-command: set NDB_CONNECTSTRING (the cluster's management server)" >&2; exit 2; }
command -v memtier_benchmark >/dev/null || { echo "by-command: memtier_benchmark is not on PATH (see bench/run-memtier.sh)" >&2; exit 2; }
[ -n "${NDB_LIB_DIR:-}" ] && export LD_LIBRARY_PATH="$NDB_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nm=""
if [ -n "${NDBMEMCACHE_DIR:-}" ]; then
  nm=$NDBMEMCACHE_DIR/extra/memcached/memcached
  [ -x "$nm" ] && [ -f "$NDBMEMCACHE_DIR/ndb_engine.so" ] ||
    { echo "by-command: NDBMEMCACHE_DIR has no extra/memcached/memcached and ndb_engine.so" >&2; exit 2; }
fi
case $MODE in
  small) mt=(-d 32 --key-maximum=100000 --ratio=1:10) ;;
  large) mt=(-d 20000 --key-prefix=b: --key-maximum=1000 --ratio=1:1) ;;
  large_gets) mt=(-d 20000 --key-prefix=b: --key-maximum=1000 --ratio=0:1) ;;
  *) echo "by-command: unknown MODE $MODE (small large large_gets)" >&2; exit 2 ;;
esac
data_nodes=$(pgrep -x 'ndbmtd|ndbd' | paste -sd, || true)
perf=""
[ -n "$data_nodes" ] && command -v perf >/dev/null && perf=perf
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

# run NAME: one measured run against the target on PORT.
run() {
  local ps="" ops
  if [ "$MODE" = large_gets ]; then
    timeout 120 memtier_benchmark -s 127.0.0.1 -p "$PORT" --protocol=memcache_text --hide-histogram "${mt[@]}" \
      --key-minimum=1 --key-pattern=P:P --ratio=1:0 -t 1 -c 1 --requests=allkeys >"$tmp/pre.txt" 2>&1 ||
      { echo "by-command: $1: preload failed" >&2; tail -3 "$tmp/pre.txt" >&2; return 0; }
  fi
  if [ -n "$perf" ]; then
    perf stat -e context-switches,cpu-clock -p "$data_nodes" -o "$tmp/perf.txt" -- sleep "$TIME" & ps=$!
  fi
  # memtier waits for ever after an error reply (README.md): bounded.
  timeout $((TIME * 2 + 30)) memtier_benchmark -s 127.0.0.1 -p "$PORT" --protocol=memcache_text --hide-histogram "${mt[@]}" \
    --key-minimum=1 --test-time="$TIME" --key-pattern=R:R --distinct-client-seed --randomize -t 1 -c 1 --pipeline=1 \
    >"$tmp/mt.txt" 2>&1 || echo "by-command: $1: memtier failed or was stopped" >&2
  [ -n "$ps" ] && wait "$ps"
  ops=$(awk '/^Totals/ {print $2}' "$tmp/mt.txt")
  [ -n "$ops" ] || { tail -3 "$tmp/mt.txt" >&2; return 0; }
  awk -v name="$1" -v t="$trial" -v time="$TIME" -v perf="$perf" '
    FILENAME ~ /mt.txt$/ && /^Totals/ {ops = $2; p50 = $6; p99 = $7}
    FILENAME ~ /mt.txt$/ && /^Sets/ {sets = $6 "/" $7}
    FILENAME ~ /mt.txt$/ && /^Gets/ {gets = $6 "/" $7}
    FILENAME ~ /perf.txt$/ && /context-switches/ {gsub(",", "", $1); cs = $1}
    FILENAME ~ /perf.txt$/ && /cpu-clock/ {gsub(",", "", $1); cpu = $1}
    END {
      dn = "-"
      if (perf != "" && ops > 0) dn = sprintf("%.2f %.1f", cs / (ops * time), cpu * 1000 / (ops * time))
      printf "%-40s %s %8.0f %s %s %s %s %s\n", name, t, ops, p50, p99, sets, gets, dn
    }' "$tmp/mt.txt" $([ -n "$perf" ] && echo "$tmp/perf.txt")
}

host_line
echo "MODE $MODE; per run: target trial requests/s p50 p99 sets-p50/p99 gets-p50/p99 (ms), data nodes' context switches and CPU µs a request"
for trial in $(seq "$TRIALS"); do
  for b in "$@"; do
    "$b" serve --ndb-connectstring "$NDB_CONNECTSTRING" --ndb-pool-size 2 --memcache "127.0.0.1:$PORT" \
      --rest "127.0.0.1:$REST" --grpc "127.0.0.1:$GRPC" --log-level warn --ndbmemcache-role db-only >"$tmp/gw.log" 2>&1 &
    pid=$!
    wait_ready "$pid" "$REST" "$tmp/gw.log" by-command || exit 1
    run "$b"
    kill "$pid"; wait "$pid" || true; pid=""
  done
  if [ -n "$nm" ]; then
    user=(); [ "$(id -u)" -eq 0 ] && user=(-u root)
    "$nm" "${user[@]}" -E "$NDBMEMCACHE_DIR/ndb_engine.so" -e "connectstring=$NDB_CONNECTSTRING;role=db-only" \
      -l 127.0.0.1 -p "$PORT" -U 0 -t 2 >"$tmp/nm.log" 2>&1 &
    pid=$!
    wait_port "$PORT" || { tail -5 "$tmp/nm.log" >&2; exit 1; }
    sleep 1 # its scheduler connects after it listens
    run ndbmemcache
    kill "$pid"; wait "$pid" || true; pid=""
  fi
done
