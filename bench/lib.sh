# shellcheck shell=bash
# What the bench scripts share; each sources it: . "$(dirname "$0")/lib.sh"

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

# memtier_preload PORT KEYS [memtier options...]: stores every key up to KEYS
# once (sequential keys, each client its share) on 127.0.0.1:PORT, so that a
# measured run's reads hit. The options give the protocol, the value size,
# threads, connections, pipeline and --key-minimum (memtier's default is 0).
memtier_preload() {
  local port=$1 keys=$2
  shift 2
  memtier_benchmark -s 127.0.0.1 -p "$port" --hide-histogram "$@" \
    --ratio=1:0 --key-pattern=P:P --key-maximum="$keys" --requests=allkeys
}
