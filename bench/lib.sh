# shellcheck shell=bash
# What the bench scripts share; each sources it: . "$(dirname "$0")/lib.sh"

# host_line prints what moves every figure on a host: its CPUs and, on a
# KVM guest, the kernel's halt polling. At 0 an idle vCPU halts at once and
# a wake of it costs tens of microseconds, which one connection pays a few
# times a request (docs/PERFORMANCE.md, "On a VM, the guest's idle states").
host_line() {
  local model poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns halt=""
  model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
  [ -r "$poll" ] && halt="; guest_halt_poll_ns $(cat "$poll")"
  echo "host: $(nproc) CPUs, ${model:-model unknown}$halt"
}

# WAIT_PORT_SECONDS bounds wait_port: long enough for a data dir's recovery
# or a cluster connection, where a server starts in milliseconds otherwise.
WAIT_PORT_SECONDS=${WAIT_PORT_SECONDS:-60}

# wait_port PORT [HOST]: returns once HOST (default 127.0.0.1) accepts a
# connection on PORT, trying every millisecond (resources.sh and persist.sh
# time start-up to listening by it); fails, saying so, after
# WAIT_PORT_SECONDS.
wait_port() {
  local port=$1 host=${2:-127.0.0.1}
  local deadline=$((${EPOCHREALTIME/./} + WAIT_PORT_SECONDS * 1000000))
  until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
    if [ "${EPOCHREALTIME/./}" -ge "$deadline" ]; then
      echo "bench: $host:$port did not accept a connection within ${WAIT_PORT_SECONDS}s" >&2
      return 1
    fi
    sleep 0.001
  done
}

# proc_ticks PID: the user+system clock ticks PID has used (/proc, a
# command name with spaces or parentheses included).
proc_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# proc_sys_ticks PID: the system part of proc_ticks.
proc_sys_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $13}'; }

# wait_ready PID PORT LOG NAME: returns once the ndbgate of PID answers
# /readyz on 127.0.0.1:PORT (its REST port): connected to its cluster and
# its tables described. Fails, printing LOG's tail under NAME, if PID exits
# or 30 s pass.
wait_ready() {
  local pid=$1 port=$2 log=$3 name=$4
  for _ in $(seq 600); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "$name: ndbgate did not become ready:" >&2
  tail -5 "$log" >&2
  return 1
}

# memtier_preload PORT KEYS [memtier options...]: stores every key up to KEYS
# once (sequential keys, each client its share) on 127.0.0.1:PORT, so that a
# measured run's reads hit. The options give the protocol, the value size,
# threads, connections, pipeline and --key-minimum (memtier's default is 0).
memtier_preload() {
  local port=$1 keys=$2
  shift 2
  # memtier waits for ever after an error reply (README.md): bounded.
  timeout "${PRELOAD_SECONDS:-600}" memtier_benchmark -s 127.0.0.1 -p "$port" --hide-histogram "$@" \
    --ratio=1:0 --key-pattern=P:P --key-maximum="$keys" --requests=allkeys
}

# start_target TARGET PORT [MAXCONNS]: starts memcached (TARGET memcached)
# or the ndbgate binary TARGET, memcache only, on 127.0.0.1:PORT in the
# background, and sets pid; each takes MAXCONNS connections (default 4096).
# Returns once it listens, or fails, saying so.
start_target() {
  local target=$1 port=$2 conns=${3:-4096} user=()
  [ "$(id -u)" -eq 0 ] && user=(-u nobody)
  if [ "$target" = memcached ]; then
    memcached -p "$port" -U 0 -l 127.0.0.1 -t 2 -m 1024 -c "$conns" "${user[@]}" & pid=$!
  else
    "$target" serve --memcache "127.0.0.1:$port" --rest "" --grpc "" --log-level warn --max-connections "$conns" & pid=$!
  fi
  wait_port "$port" || { echo "bench: $target did not listen on $port" >&2; return 1; }
}
