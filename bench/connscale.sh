#!/usr/bin/env bash
# Connection scale: what idle connections cost ndbgate (embedded engine) and
# memcached, and whether they slow the active ones. For each count of idle
# connections (IDLE, default "0 1000 10000") and each target, alternated
# within each trial: start the server afresh, preload, open the idle
# connections (bench/cmd/idleconns: each answers "version" once, then stays
# open and silent), read the server's RSS, and run memtier on 50 active
# connections (text, 1:10, 32 B, pipeline 1). Prints per-connection RSS
# ((RSS with N idle - RSS with none) / N) and throughput with N idle against
# none, as medians over TRIALS with their spread, and appends rows to
# $OUT/connscale.csv.
#
#   bench/connscale.sh
#   TRIALS=5 TIME=8 IDLE="0 1000 10000" bench/connscale.sh
#
# memcached's -c is raised to cover the idle connections, as its docs say
# (its -c sets the open-files limit it asks for); the hard limit on open
# files (ulimit -Hn) must cover the idle connections plus memtier's.
# Measure only on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
host_line

TRIALS=${TRIALS:-5}
TIME=${TIME:-8}
IDLE=${IDLE:-0 1000 10000}
KEYS=${KEYS:-100000}
PORT=${PORT:-22900}
OUT=${OUT:-bench/results}

missing=()
command -v memtier_benchmark >/dev/null || missing+=("memtier_benchmark on PATH (see bench/run-memtier.sh)")
command -v memcached >/dev/null || missing+=("memcached (apt-get install memcached)")
most=0; for n in $IDLE; do [ "$n" -gt "$most" ] && most=$n; done
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge $((most + 200)) ] ||
  missing+=("an open-files hard limit of at least $((most + 200)) (ulimit -Hn is $(ulimit -Hn))")
if [ ${#missing[@]} -gt 0 ]; then
  echo "connscale: missing:" >&2; printf '  - %s\n' "${missing[@]}" >&2; exit 2
fi
ulimit -n "$(ulimit -Hn)"

mkdir -p "$OUT" bin
go build -o bin/ndbgate ./cmd/ndbgate
go build -o bin/idleconns ./bench/cmd/idleconns
tmp=$(mktemp -d /tmp/ndbgate-connscale.XXXXXX)
pid=""; idle_pid=""
# Ifs, not "[ … ] && …": under set -e a function whose last test is false
# fails, and the EXIT trap then stopped before removing $tmp (exit 1).
stop_all() {
  if [ -n "$idle_pid" ]; then kill "$idle_pid" 2>/dev/null || true; wait "$idle_pid" 2>/dev/null || true; idle_pid=""; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi
}
trap 'stop_all; rm -rf "$tmp"' EXIT
maxconns=$((most + 1024))
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

csv=$OUT/connscale.csv
[ -f "$csv" ] || echo "date,target,idle,trial,rss_kib,base_rss_kib,ops_per_s,p99_ms" >"$csv"
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for trial in $(seq "$TRIALS"); do
  for n in $IDLE; do
    for target in ndbgate memcached; do
      bin=memcached; [ "$target" = ndbgate ] && bin=bin/ndbgate
      start_target "$bin" "$PORT" "$maxconns"
      memtier_preload "$PORT" "$KEYS" --protocol=memcache_text -d 32 -t 2 -c 4 --pipeline=16 --key-minimum=1 >/dev/null 2>&1
      sleep 0.5
      base=$(rss_kib "$pid")
      if [ "$n" -gt 0 ]; then
        # idleconns holds its connections until its standard input closes.
        coproc IDLECONNS { exec bin/idleconns -addr "127.0.0.1:$PORT" -n "$n"; }
        idle_pid=$IDLECONNS_PID
        read -r ready <&"${IDLECONNS[0]}" || { echo "connscale: idleconns failed" >&2; exit 1; }
        [ "$ready" = "ready $n" ] || { echo "connscale: idleconns said '$ready'" >&2; exit 1; }
        sleep 0.5
      fi
      rss=$(rss_kib "$pid")
      memtier_benchmark -s 127.0.0.1 -p "$PORT" --protocol=memcache_text --hide-histogram -t 2 -c 25 \
        --ratio=1:10 -d 32 --pipeline=1 --key-pattern=R:R --key-minimum=1 --key-maximum="$KEYS" \
        --test-time="$TIME" --json-out-file="$tmp/run.json" >"$tmp/run.txt" 2>&1 ||
        { echo "connscale: memtier failed:" >&2; tail -5 "$tmp/run.txt" >&2; exit 1; }
      read -r ops _ _ _ p99 _ < <(python3 bench/memtier_json.py "$tmp/run.json" "$TIME")
      echo "$stamp,$target,$n,$trial,$rss,$base,$ops,$p99" >>"$csv"
      printf '  trial %s  %-9s %6s idle: RSS %s KiB (%s before), %s ops/s, p99 %s ms\n' "$trial" "$target" "$n" "$rss" "$base" "$ops" "$p99"
      stop_all
    done
  done
done

python3 - "$csv" "$stamp" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["date"] == sys.argv[2]]
def spread(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else ""
by = {}
for r in rows:
    by.setdefault((r["target"], int(r["idle"])), {})[r["trial"]] = r
print("| target | idle connections | RSS MiB | RSS per idle connection, KiB | ops/s | ops/s against 0 idle |")
print("|---|---|---|---|---|---|")
for (target, n), trials in sorted(by.items()):
    zero = by.get((target, 0), {})
    per = [(float(r["rss_kib"]) - float(r["base_rss_kib"])) / n for r in trials.values()] if n else []
    ratio = [float(r["ops_per_s"]) / float(zero[t]["ops_per_s"]) for t, r in trials.items() if t in zero and n]
    rss = statistics.median(float(r["rss_kib"]) for r in trials.values()) / 1024
    ops = statistics.median(float(r["ops_per_s"]) for r in trials.values())
    print(f"| {target} | {n} | {rss:.1f} | {spread(per)} | {ops:,.0f} | {spread(ratio)} |")
PY
