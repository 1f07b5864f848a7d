#!/usr/bin/env python3
"""How long one text get of many keys takes, whole.

Sends `get k0 k1 ... k<KEYS-1>` (distinct keys; run it on a server that
stores none of them, so that only END ends the reply) on a fresh connection, reads to the final END, and repeats
REPS times; prints the median, min and max. A get over 512 keys goes to
ndbgate's engine in slices (bench/RESULTS.md, sessions 32 and 33), and its
cost should grow with its keys, not their square.

    bench/bigget-time.py PORT KEYS [REPS]
"""
import socket
import statistics
import sys
import time

port, keys = int(sys.argv[1]), int(sys.argv[2])
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
line = ("get " + " ".join(f"k{i}" for i in range(keys)) + "\r\n").encode()
times = []
for _ in range(reps):
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.perf_counter()
    s.sendall(line)
    got = b""
    while not got.endswith(b"END\r\n"):
        chunk = s.recv(1 << 16)
        if not chunk:
            sys.exit(f"bigget-time: the server closed the connection after {len(got)} bytes")
        got = (got + chunk)[-5:]  # only the tail decides
    times.append(time.perf_counter() - t0)
    s.close()
print(f"{keys} keys, {len(line)} bytes: median {statistics.median(times) * 1e3:.1f} ms "
      f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}) over {reps}")
