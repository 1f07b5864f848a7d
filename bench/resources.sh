#!/usr/bin/env bash
# What a sidecar costs: ndbgate's idle RSS and start-up time to listening, and
# peak RSS and bytes per stored item for ITEMS items of 32 B and of 1 KiB,
# against memcached. Writes bench/results/resources.csv, then runs report.py.
#
#   bench/resources.sh               # ITEMS=1000000 STARTS=10
#
# Keys are KEY_PREFIXES (space separated; default "key: memtier-") followed by
# the item's number: "key:" makes keys of about 10 bytes (the issue's measure),
# "memtier-" about 14 (memtier's own default). Each prefix is loaded into a
# fresh ndbgate and a fresh memcached, and reported with its mean key length.
#
# Loading uses memtier_benchmark (see run-memtier.sh for where to get it).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ITEMS=${ITEMS:-1000000}
STARTS=${STARTS:-10}
PORT=${PORT:-22136}
OUT=${OUT:-bench/results}
KEY_PREFIXES=${KEY_PREFIXES:-key: memtier-}
for tool in memtier_benchmark memcached python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "resources: $tool is not on PATH (memtier_benchmark: see bench/run-memtier.sh)" >&2; exit 2; }
done
mkdir -p "$OUT" bin
go build -o bin/ndbgate ./cmd/ndbgate
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }  # VmRSS / VmHWM in KiB
now_ns() { date +%s%N; }

csv=$OUT/resources.csv
echo "measure,target,value" > "$csv"

# Start-up to listening, and idle RSS after a second, median of STARTS.
starts=(); idles=()
for _ in $(seq "$STARTS"); do
  t0=$(now_ns)
  bin/ndbgate serve --memcache "127.0.0.1:$PORT" --rest "" --grpc "" --log-level warn & p=$!
  wait_port "$PORT"
  t1=$(now_ns)
  sleep 1
  starts+=($(( (t1 - t0) / 1000000 ))); idles+=("$(kib "$p" VmRSS)")
  kill "$p"; wait "$p" 2>/dev/null || true
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "start-up to listening (ms; median of $STARTS),ndbgate,$(median "${starts[@]}")" >> "$csv"
echo "idle RSS (MiB; median of $STARTS),ndbgate,$(awk -v k="$(median "${idles[@]}")" 'BEGIN {printf "%.1f", k/1024}')" >> "$csv"
user_flag=(); [ "$(id -u)" -eq 0 ] && user_flag=(-u root)
memcached -p "$PORT" -U 0 -l 127.0.0.1 -t 2 -m 8192 "${user_flag[@]}" & p=$!; wait_port "$PORT"; sleep 1
echo "idle RSS (MiB; median of $STARTS),memcached,$(awk -v k="$(kib "$p" VmRSS)" 'BEGIN {printf "%.1f", k/1024}')" >> "$csv"
kill "$p"; wait "$p" 2>/dev/null || true

# Mean length of keys prefix1..prefixITEMS.
keylen() { awk -v p="$1" -v n="$ITEMS" 'BEGIN { t = 0; d = 1; for (lo = 1; lo <= n; lo *= 10) { hi = lo * 10 - 1; if (hi > n) hi = n; t += (hi - lo + 1) * d; d++ } printf "%.0f", length(p) + t / n }'; }

# ITEMS items of each size and key prefix: RSS before and after loading.
for prefix in $KEY_PREFIXES; do
 klen=$(keylen "$prefix")
 for size in 32 1024; do
  for target in ndbgate memcached; do
    if [ "$target" = ndbgate ]; then
      bin/ndbgate serve --memcache "127.0.0.1:$PORT" --rest "" --grpc "" --log-level warn & p=$!
    else
      memcached -p "$PORT" -U 0 -l 127.0.0.1 -t 2 -m 8192 "${user_flag[@]}" & p=$!
    fi
    wait_port "$PORT"; sleep 0.5
    before=$(kib "$p" VmRSS)
    memtier_preload "$PORT" "$ITEMS" --protocol=memcache_text -t 2 -c 4 --key-prefix="$prefix" --key-minimum=1 -d "$size" >/dev/null 2>&1
    sleep 2
    items=$(printf 'stats\r\nquit\r\n' | timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT; cat >&3; cat <&3" | awk '$2 == "curr_items" {print $3+0}')
    after=$(kib "$p" VmRSS); hwm=$(kib "$p" VmHWM)
    what="$size B values; $klen B keys"  # no comma: the CSV is not quoted
    echo "items stored ($what),$target,$items" >> "$csv"
    echo "peak RSS with $ITEMS x $size B (MiB; $klen B keys),$target,$(awk -v k="$hwm" 'BEGIN {printf "%.0f", k/1024}')" >> "$csv"
    echo "bytes per item ($what; RSS growth / items),$target,$(awk -v a="$after" -v b="$before" -v n="$items" 'BEGIN {printf "%.0f", (a-b)*1024/n}')" >> "$csv"
    kill "$p"; wait "$p" 2>/dev/null || true
  done
 done
done
cat "$csv"
python3 bench/report.py
