#!/usr/bin/env bash
# Where a memtier run's CPU goes: the server's and memtier's CPU per op, and
# how much of the machine sat idle, for one target at binary pipeline 16.
# A server that spends less CPU per op can still serve fewer ops/s when the
# cores idle between its turns and memtier's; this tells the two apart.
#
#   bench/cpu-per-op.sh /tmp/ndbgate 1:1      # an ndbgate binary, sets:gets
#   bench/cpu-per-op.sh memcached 1:10
#   RATIO sets only: 1:0; gets only: 0:1. Env: TIME (10), KEYS (100000), PORT.
#
# Measure only on a quiet machine.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 TARGET RATIO (TARGET: an ndbgate binary's path, or memcached)" >&2; exit 2; }
target=$1 ratio=$2
TIME=${TIME:-10}
KEYS=${KEYS:-100000}
PORT=${PORT:-22800}
. "$(dirname "$0")/lib.sh"
command -v memtier_benchmark >/dev/null || { echo "cpu-per-op: memtier_benchmark is not on PATH (see bench/run-memtier.sh)" >&2; exit 2; }
out=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$out"' EXIT
start_target "$target" "$PORT"
args=(-s 127.0.0.1 -p "$PORT" --protocol=memcache_binary -d 32 --pipeline=16 --hide-histogram -t 2)
memtier_preload "$PORT" "$KEYS" "${args[@]}" -c 4 >/dev/null 2>&1
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
idle() { awk '/^cpu /{print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
t0=$(ticks); read -r i0 a0 < <(idle)
/usr/bin/time -f "%U %S" -o "$out/time" memtier_benchmark "${args[@]}" -c 25 --ratio="$ratio" --key-pattern=R:R \
  --key-maximum="$KEYS" --test-time "$TIME" --json-out-file="$out/run.json" >/dev/null 2>&1
t1=$(ticks); read -r i1 a1 < <(idle)
ops=$(python3 "$(dirname "$0")/memtier_json.py" "$out/run.json" "$TIME" | awk '{print $1}')
python3 - "$target" "$ratio" "$ops" "$TIME" "$t0" "$t1" "$(cat "$out/time")" "$i0" "$i1" "$a0" "$a1" <<'PY'
import os, sys
target, ratio, ops, secs = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
hz = os.sysconf("SC_CLK_TCK")
server = (float(sys.argv[6]) - float(sys.argv[5])) / hz
user, system = map(float, sys.argv[7].split())
idle = (float(sys.argv[9]) - float(sys.argv[8])) / max(1.0, float(sys.argv[11]) - float(sys.argv[10]))
n = ops * secs
print(f"{target} {ratio}: {ops:,.0f} ops/s, server {server * 1e6 / n:.3f} us/op, memtier {(user + system) * 1e6 / n:.3f} us/op, idle {100 * idle:.1f} %")
PY
