#!/usr/bin/env python3
"""A connection's round trips while its neighbours send huge gets.

Four clients each open a connection, send a text get of KEYS keys (the same
missing key), wait 5 ms and hang up, half of them with a reset, over and
over; meanwhile one more connection does set round trips. Prints the good
connection's round trips, how many were refused (SERVER_ERROR), and their
p50, p90, p99 and max. A server that runs a big get whole on the loop its
neighbours share keeps them waiting (bench/RESULTS.md, session 32).

With SHAPE "pipelined" each neighbour sends KEYS gets of one key each
instead, a pipeline's flood: one that could fill the dispatcher got the
good connection's sets refused as busy (bench/RESULTS.md, session 50).
With LONE "get" the good connection does get round trips of a key it set
first, instead of sets (bench/RESULTS.md, session 51).

    bench/bigget-neighbours.py PORT [SECONDS [KEYS [SHAPE [LONE]]]]
"""
import socket
import struct
import sys
import threading
import time

port = int(sys.argv[1])
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
keys = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
shape = sys.argv[4] if len(sys.argv) > 4 else "big"
lone = sys.argv[5] if len(sys.argv) > 5 else "set"
if lone not in ("set", "get"):
    sys.exit(f"bigget-neighbours: LONE is set or get, not {lone!r}")
if shape == "pipelined":
    payload = b"get gx:k\r\n" * keys
elif shape == "big":
    payload = b"get " + b"gx:k " * keys + b"\r\n"
else:
    sys.exit(f"bigget-neighbours: SHAPE is big or pipelined, not {shape!r}")
stop = threading.Event()
sent = [0]


def neighbour():
    n = 0
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(payload)
            time.sleep(0.005)
            if n % 2 == 0:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        except OSError:
            pass
        n += 1
        sent[0] += 1


threads = [threading.Thread(target=neighbour) for _ in range(4)]
for t in threads:
    t.start()
good = socket.create_connection(("127.0.0.1", port))
set_req, get_req = b"set ga:1 0 0 1\r\nv\r\n", b"get ga:1\r\n"
hit = b"VALUE ga:1 0 1\r\nv\r\nEND\r\n"
if lone == "get":
    good.sendall(set_req)
    if good.recv(100) != b"STORED\r\n":
        sys.exit("bigget-neighbours: the good connection's first set failed")
times = []
refused = 0
start = time.time()
while time.time() - start < seconds:
    t0 = time.time()
    good.sendall(get_req if lone == "get" else set_req)
    reply = b""
    while not (reply.endswith(b"END\r\n") if lone == "get" else reply.endswith(b"\r\n")) \
            and not (reply.startswith(b"SERVER_ERROR") and reply.endswith(b"\r\n")):
        reply += good.recv(100)
    if reply.startswith(b"SERVER_ERROR"):
        refused += 1
    elif reply != (hit if lone == "get" else b"STORED\r\n"):
        sys.exit(f"bigget-neighbours: unexpected reply {reply!r}")
    times.append((time.time() - t0) * 1000)
stop.set()
for t in threads:
    t.join()
times.sort()
q = lambda f: times[min(len(times) - 1, int(len(times) * f))]
print(f"round trips {len(times)}  refused {refused}  neighbours' connections {sent[0]}  "
      f"p50 {q(0.5):.2f} ms  p90 {q(0.9):.2f} ms  p99 {q(0.99):.2f} ms  max {times[-1]:.1f} ms")
