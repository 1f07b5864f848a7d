#!/usr/bin/env bash
# memtier_benchmark against ndbgate (embedded engine) and the peers a user would
# otherwise run: memcached, and twemproxy (nutcracker) in front of memcached.
# Identical settings, targets alternated A B C A B C within one run, key space
# preloaded first. Appends one CSV row per run to $OUT/memtier.csv, then
# regenerates the memtier section of bench/RESULTS.md (bench/report.py).
#
#   bench/run-memtier.sh                          # the default workload, 3 trials of 15 s
#   WORKLOADS=all TRIALS=3 TIME=15 bench/run-memtier.sh   # the whole matrix (about 3 hours)
#   WORKLOADS="default conns sizes" bench/run-memtier.sh  # named groups, see below
#   RESUME=1 WORKLOADS=all bench/run-memtier.sh    # only workloads with no rows in the CSV yet
#
# Groups: default (text 1:10 32 B pipeline 1, 50 connections), binary (the same
# over the binary protocol), ratio (1:1), sizes (1 KiB, 16 KiB), pipeline (16),
# conns (1, 8, 50, 200 connections), mget (text multi-key get of 10 and 100),
# all (every group).
#
# memtier_benchmark is not in Debian's packages. Its source is
# github.com/RedisLabs/memtier_benchmark (needs autoconf, automake,
# libevent-dev, libssl-dev, zlib1g-dev); build it outside this repo and put it
# on PATH. twemproxy speaks only memcached's text protocol, so binary workloads
# run against ndbgate and memcached only.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

WORKLOADS=${WORKLOADS:-default}
TRIALS=${TRIALS:-${ROUNDS:-3}} # ROUNDS is its old name
TIME=${TIME:-15}
KEYS=${KEYS:-100000}
PORT=${PORT:-22130}
OUT=${OUT:-bench/results}
NG_ARGS=${NG_ARGS:-}

if ! command -v memtier_benchmark >/dev/null 2>&1; then
  cat >&2 <<'EOF'
run-memtier: memtier_benchmark is not on PATH.
  It is not in Debian's packages. Build it from its public source,
  https://github.com/RedisLabs/memtier_benchmark (apt-get install autoconf automake
  libevent-dev libssl-dev zlib1g-dev pkg-config; autoreconf -ivf && ./configure && make),
  outside this repository, and put the binary on PATH.
EOF
  exit 2
fi
missing=()
command -v memcached >/dev/null 2>&1 || missing+=(memcached)
command -v nutcracker >/dev/null 2>&1 || missing+=(nutcracker)
command -v gnuplot >/dev/null 2>&1 || missing+=(gnuplot-nox)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "run-memtier: apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
  else
    echo "run-memtier: install ${missing[*]} (Debian packages)" >&2
    exit 2
  fi
fi

mkdir -p "$OUT" bin
go build -o bin/ndbgate ./cmd/ndbgate
tmp=$(mktemp -d /tmp/ndbgate-memtier.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

NG=$PORT; MC=$((PORT + 1)); TW=$((PORT + 2))
user_flag=(); [ "$(id -u)" -eq 0 ] && user_flag=(-u root)
memcached -p "$MC" -U 0 -l 127.0.0.1 -t 2 -m 4096 -c 4096 "${user_flag[@]}" & pids+=($!)
# shellcheck disable=SC2086
bin/ndbgate serve --memcache "127.0.0.1:$NG" --rest "" --grpc "" --log-level warn $NG_ARGS & pids+=($!)
cat > "$tmp/nutcracker.yml" <<EOF
pool:
  listen: 127.0.0.1:$TW
  hash: fnv1a_64
  distribution: ketama
  timeout: 4000
  server_connections: 2
  servers:
    - 127.0.0.1:$MC:1
EOF
nutcracker -c "$tmp/nutcracker.yml" -o "$tmp/nutcracker.log" -s $((PORT + 3)) & pids+=($!)
for port in "$NG" "$MC" "$TW"; do
  wait_port "$port"
done

# Workloads: name proto ratio size pipeline conns mget
declare -a W=()
add() { # a workload named twice (conns includes the default) runs once
  local w
  for w in "${W[@]}"; do [ "${w%% *}" = "$1" ] && return; done
  W+=("$*")
}
for g in $WORKLOADS; do
  case $g in
    default) add text_1:10_32B_p1_c50 memcache_text 1:10 32 1 50 0 ;;
    binary) add binary_1:10_32B_p1_c50 memcache_binary 1:10 32 1 50 0 ;;
    ratio) add text_1:1_32B_p1_c50 memcache_text 1:1 32 1 50 0
           add binary_1:1_32B_p1_c50 memcache_binary 1:1 32 1 50 0 ;;
    sizes) for s in 1024 16384; do
             add "text_1:10_${s}B_p1_c50" memcache_text 1:10 "$s" 1 50 0
             add "binary_1:10_${s}B_p1_c50" memcache_binary 1:10 "$s" 1 50 0
           done ;;
    pipeline) add text_1:10_32B_p16_c50 memcache_text 1:10 32 16 50 0
              add binary_1:10_32B_p16_c50 memcache_binary 1:10 32 16 50 0 ;;
    conns) for c in 1 8 50 200; do add "text_1:10_32B_p1_c$c" memcache_text 1:10 32 1 "$c" 0; done ;;
    mget) for n in 10 100; do add "text_mget${n}_32B_p1_c50" memcache_text "0:$n" 32 1 50 "$n"; done ;;
    all) WORKLOADS_ALL=1 ;;
    *) echo "run-memtier: unknown workload group '$g' (default binary ratio sizes pipeline conns mget all)" >&2; exit 2 ;;
  esac
done
if [ "${WORKLOADS_ALL:-}" = 1 ]; then
  W=()
  add text_1:10_32B_p1_c50 memcache_text 1:10 32 1 50 0
  add binary_1:10_32B_p1_c50 memcache_binary 1:10 32 1 50 0
  for proto in memcache_text memcache_binary; do
    short=${proto#memcache_}
    for ratio in 1:10 1:1; do for size in 32 1024 16384; do for pl in 1 16; do
      name="${short}_${ratio}_${size}B_p${pl}_c50"
      [ "$name" = text_1:10_32B_p1_c50 ] || [ "$name" = binary_1:10_32B_p1_c50 ] || add "$name" "$proto" "$ratio" "$size" "$pl" 50 0
    done; done; done
  done
  for c in 1 8 200; do add "text_1:10_32B_p1_c$c" memcache_text 1:10 32 1 "$c" 0; done
  for n in 10 100; do add "text_mget${n}_32B_p1_c50" memcache_text "0:$n" 32 1 50 "$n"; done
fi

csv=$OUT/memtier.csv
if [ "${RESUME:-}" = 1 ] && [ -f "$csv" ]; then
  todo=()
  for w in "${W[@]}"; do cut -d, -f2 "$csv" | grep -qxF "${w%% *}" || todo+=("$w"); done
  W=("${todo[@]}")
fi
[ -f "$csv" ] || echo "date,workload,proto,ratio,size,pipeline,conns,mget,trial,target,ops_per_s,keys_per_s,p50_ms,p99_ms,p999_ms" > "$csv"
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "run-memtier: ${#W[@]} workloads x $TRIALS trials x ${TIME}s; results in $csv"
loaded=""
for w in "${W[@]}"; do
  read -r name proto ratio size pl conns mget <<<"$w"
  targets=("ndbgate:$NG" "memcached:$MC")
  [ "$proto" = memcache_text ] && targets+=("twemproxy:$TW")
  threads=2; per=$((conns / 2)); [ "$conns" -lt 2 ] && threads=1 && per=1
  common=(-s 127.0.0.1 --protocol="$proto" --hide-histogram -d "$size" --key-maximum="$KEYS" --key-minimum=1)
  # Preload the key space with values of this size whenever the size changes
  # (twemproxy reads memcached's items).
  if [ "$size" != "$loaded" ]; then
    for t in "ndbgate:$NG" "memcached:$MC"; do
      memtier_preload "${t#*:}" "$KEYS" "${common[@]}" -t 1 -c 1 >/dev/null 2>&1
    done
    loaded=$size
  fi
  run=(-t "$threads" -c "$per" --ratio="$ratio" --pipeline="$pl" --test-time="$TIME" --key-pattern=R:R --distinct-client-seed --randomize)
  [ "$mget" != 0 ] && run+=(--multi-key-get="$mget")
  for trial in $(seq "$TRIALS"); do
    for t in "${targets[@]}"; do
      target=${t%%:*}; port=${t#*:}
      json=$tmp/run.json
      if ! memtier_benchmark "${common[@]}" -p "$port" "${run[@]}" --json-out-file="$json" >"$tmp/run.txt" 2>&1; then
        echo "run-memtier: $name trial $trial $target failed:" >&2; tail -5 "$tmp/run.txt" >&2; continue
      fi
      # memtier's own rates divide by a misreported duration (memtier_json.py).
      read -r ops keys _ p50 p99 p999 < <(python3 bench/memtier_json.py "$json" "$TIME" "$([ "$mget" = 0 ] && echo 1 || echo "$mget")")
      echo "$stamp,$name,$proto,$ratio,$size,$pl,$conns,$mget,$trial,$target,$ops,$keys,$p50,$p99,$p999" >> "$csv"
      echo "  $name t$trial $target: $(tail -1 "$csv" | cut -d, -f11-)"
    done
  done
done
python3 bench/report.py
