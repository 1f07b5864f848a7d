#!/usr/bin/env bash
# The data dir (--data-dir): how long ndbgate takes to come back with ITEMS
# items, from the snapshot a graceful stop writes and from the log alone after
# kill -9; how long the graceful stop takes (it writes that snapshot); and
# what each --fsync policy costs sets, against no data dir. Prints a table
# and writes bench/results/persist.csv. Needs only Go and bash.
#
#   bench/persist.sh                                  # ITEMS=1000000 VALUE=100 TRIALS=3 WRITE_SECS=10
#   ITEMS=20000 TRIALS=1 WRITE_SECS=1 bench/persist.sh # a quick check that it works
#
# DIR is where the data dirs go (default: a temporary dir under TMPDIR; put it
# on the disk you mean to measure, since fsync costs what that disk costs).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ITEMS=${ITEMS:-1000000}
VALUE=${VALUE:-100}
TRIALS=${TRIALS:-${ROUNDS:-3}} # ROUNDS is its old name
WRITE_SECS=${WRITE_SECS:-10}
PORT=${PORT:-22137}
OUT=${OUT:-bench/results}
DIR=${DIR:-}

mkdir -p "$OUT" bin
go build -o bin/ndbgate ./cmd/ndbgate
go build -o bin/ndbgate-bench ./bench/cmd/ndbgate-bench
work=$(mktemp -d "${DIR:-${TMPDIR:-/tmp}}/ndbgate-persist.XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# start DATA_DIR [flags...]: serve memcache only; sets pid and listen_ms (exec
# to accepting connections, loading included).
start() {
  local dir=$1; shift
  local t0; t0=$(now_ms)
  bin/ndbgate serve --memcache "127.0.0.1:$PORT" --rest "" --grpc "" ${dir:+--data-dir "$dir"} "$@" >>"$work/ndbgate.log" 2>&1 &
  pid=$!
  wait_port "$PORT"
  listen_ms=$(( $(now_ms) - t0 ))
}
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=; }
crash() { kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

# curr_items asks the running server's stats.
curr_items() {
  exec 3<>/dev/tcp/127.0.0.1/"$PORT"
  printf 'stats\r\n' >&3
  local line n=
  while IFS= read -r line <&3; do
    line=${line%$'\r'}
    case $line in
      "STAT curr_items "*) n=${line#STAT curr_items } ;;
      END) break ;;
    esac
  done
  exec 3<&-
  echo "$n"
}

# loaded_ms is the last "data dir loaded ... took=" of the log, in ms.
loaded_ms() {
  grep 'data dir loaded' "$work/ndbgate.log" | tail -1 | sed -E 's/.* took=([0-9.]+)(ms|s|µs).*/\1 \2/' |
    awk '{ if ($2 == "s") print $1 * 1000; else if ($2 == "µs") print $1 / 1000; else print $1 }'
}

load() {
  bin/ndbgate-bench -proto memcache-text -addr "127.0.0.1:$PORT" -keys "$ITEMS" -value-size "$VALUE" \
    -preload -ratio 0:1 -duration 100ms -warmup 0 -conns 32 -pipeline 1 -quiet -json "$work/load.json" >/dev/null
}

check_items() {
  local n; n=$(curr_items)
  [ "$n" = "$ITEMS" ] || { echo "persist: $1: curr_items=$n, want $ITEMS" >&2; tail -20 "$work/ndbgate.log" >&2; exit 1; }
}

csv=$OUT/persist.csv
echo "measure,target,value" >"$csv"
row() { echo "$1,$2,$3" >>"$csv"; printf '%-44s %-22s %s\n' "$1" "$2" "$3"; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "persist: $ITEMS items of $VALUE bytes, $TRIALS trials, data dirs under $work"

# 1. Graceful: load, stop (the stop writes a snapshot), start again.
start "$work/graceful" --fsync everysec
load
check_items "after loading"
t0=$(now_ms); stop; row "graceful stop ms (writes the snapshot)" everysec $(( $(now_ms) - t0 ))
row "snapshot bytes" everysec "$(du -cb "$work"/graceful/snap-* | tail -1 | cut -f1)"
listens=(); loads=()
for _ in $(seq "$TRIALS"); do
  start "$work/graceful" --fsync everysec
  check_items "after a graceful restart"
  listens+=("$listen_ms"); loads+=("$(loaded_ms)")
  stop
done
row "restart from snapshot: exec to listening ms" median "$(median "${listens[@]}")"
row "restart from snapshot: load ms" median "$(median "${loads[@]}")"

# 2. Crash: load with no snapshot at all, kill -9, start again (the log alone
#    is replayed; kill -9 again each trial, so no snapshot is ever written).
start "$work/crash" --fsync everysec --snapshot-interval 0 --snapshot-log-size 0
load
check_items "after loading"
crash
row "log bytes" everysec "$(du -cb "$work"/crash/log-* | tail -1 | cut -f1)"
listens=(); loads=()
for _ in $(seq "$TRIALS"); do
  start "$work/crash" --fsync everysec --snapshot-interval 0 --snapshot-log-size 0
  check_items "after kill -9"
  listens+=("$listen_ms"); loads+=("$(loaded_ms)")
  crash
done
row "restart after kill -9 (log replay): exec to listening ms" median "$(median "${listens[@]}")"
row "restart after kill -9 (log replay): load ms" median "$(median "${loads[@]}")"

# 3. Sets per second under each fsync policy (50 connections, one request in
#    flight each), and without a data dir.
for mode in none no everysec always; do
  rm -rf "$work/writes"
  if [ "$mode" = none ]; then start ""; else start "$work/writes" --fsync "$mode"; fi
  bin/ndbgate-bench -proto memcache-text -addr "127.0.0.1:$PORT" -keys 100000 -value-size "$VALUE" \
    -ratio 1:0 -duration "${WRITE_SECS}s" -warmup 1s -conns 50 -pipeline 1 -quiet -json "$work/w.json" >/dev/null
  ops=$(sed -nE 's/.*"ops_per_s": *([0-9.]+).*/\1/p' "$work/w.json" | head -1)
  p99=$(sed -nE 's/.*"P99": *([0-9.]+).*/\1/p' "$work/w.json" | head -1)
  errs=$(sed -nE 's/.*"errors": *([0-9]+).*/\1/p' "$work/w.json" | head -1)
  row "sets/s, 50 conns" "fsync=$mode" "${ops%.*}"
  row "set p99 us" "fsync=$mode" "${p99%.*}"
  [ "${errs:-0}" = 0 ] || row "set errors" "fsync=$mode" "$errs"
  stop
done
echo "persist: wrote $csv"
