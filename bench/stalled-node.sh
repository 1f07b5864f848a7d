#!/usr/bin/env bash
# What a data node that stops answering costs ndbgate's other requests.
# For each trial and each build (alternated), start the build on the live
# cluster, run bench/cmd/stalledget (CONNS connections, one get at a time,
# on demo_table), and stop data node NODE's process with SIGSTOP for STOP.
# Prints, per run, the gets completed while the node was stopped against an
# equal window before, and the connections served meanwhile; then each
# build's median share and range.
#
# KEYS=fixed (default): each connection reads one key of its own, so about
# half of them need only the node left running. KEYS=random: every
# connection reads random keys, and soon asks for one on the stopped node.
#
#   NDB_CONNECTSTRING=127.0.0.1:1186 NDB_LIB_DIR=/opt/ndb/lib \
#     TRIALS=5 bench/stalled-node.sh /tmp/ndbgate-before /tmp/ndbgate-after
#
# It never builds NDB, and it stops one of this machine's data nodes: the
# cluster must run on 127.0.0.1 (ndbd or ndbmtd started with --ndb-nodeid).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

TRIALS=${TRIALS:-5} STOP=${STOP:-1s} CONNS=${CONNS:-32} NODE=${NODE:-2} KEYS=${KEYS:-fixed}
PORT=22350 REST=22351
[ $# -ge 1 ] || { echo "usage: $0 NDB_BUILD..." >&2; exit 2; }
[ -n "${NDB_CONNECTSTRING:-}" ] || { echo "stalled-node: set NDB_CONNECTSTRING (the cluster's management server)" >&2; exit 2; }
[ -n "${NDB_LIB_DIR:-}" ] && export LD_LIBRARY_PATH="$NDB_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
case $KEYS in fixed) fixed=-fixed ;; random) fixed= ;; *) echo "stalled-node: KEYS is fixed or random" >&2; exit 2 ;; esac
for b in "$@"; do
  "$b" version 2>&1 | grep -q ndbapi || { echo "stalled-node: $b does not run, or lacks the ndbapi driver" >&2; exit 2; }
done
# The data node's worker: ndbd and ndbmtd run as an angel and its child.
node_pid() {
  local p
  for p in $(pgrep -f -- "--ndb-nodeid=$NODE\b" || true); do
    case $(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')") in ndbd | ndbmtd) echo "$p"; return ;; esac
  done
}
[ -n "$(node_pid)" ] || { echo "stalled-node: no data node started with --ndb-nodeid=$NODE here" >&2; exit 2; }

tmp=$(mktemp -d)
gw=""
trap '[ -n "$gw" ] && kill "$gw" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/stalledget" ./bench/cmd/stalledget
builds=("$@")
for r in $(seq "$TRIALS"); do
  for i in $(seq 0 $(($# - 1))); do
    b=${builds[$(((i + r - 1) % $#))]}
    "$b" serve --ndb-connectstring "$NDB_CONNECTSTRING" --memcache "127.0.0.1:$PORT" --rest "127.0.0.1:$REST" \
      --grpc "" --log-level warn >"$tmp/gw.log" 2>&1 &
    gw=$!
    wait_ready "$gw" "$REST" "$tmp/gw.log" "stalled-node ($b)" || exit 1
    res=$("$tmp/stalledget" -addr "127.0.0.1:$PORT" -c "$CONNS" $fixed -pid "$(node_pid)" -stop "$STOP")
    echo "$b $r $res" | tee -a "$tmp/runs"
    kill "$gw"; wait "$gw" 2>/dev/null || true; gw=""
    sleep 2 # the node catches up
  done
done
host_line
echo "gets served while node $NODE was stopped for $STOP ($KEYS keys, $CONNS connections), against the window before: median (range)"
python3 - "$tmp/runs" "$@" <<'PY'
import collections, statistics, sys
share, served, errs = collections.defaultdict(list), collections.defaultdict(list), collections.defaultdict(int)
conns = 0
for line in open(sys.argv[1]):
    f = line.split()
    share[f[0]].append(float(f[7]))
    served[f[0]].append(int(f[9]))
    conns = int(f[11])
    errs[f[0]] += int(f[20])
for b in sys.argv[2:]:
    s, c = sorted(share[b]), sorted(served[b])
    print(f"{b}: {statistics.median(s):.3f} ({s[0]:.3f}-{s[-1]:.3f}); connections served {statistics.median(c):.0f} of {conns} ({c[0]}-{c[-1]}); error replies {errs[b]}")
PY
