#!/usr/bin/env python3
"""Rates from a memtier_benchmark JSON report (--json-out-file).

memtier's own Ops/sec (and every other per-second figure) divides by a run
duration that it averages over its clients, the whole seconds separately
from the microseconds and each truncated (run_stats.cpp,
timeval_factorial_average): a 5-second run reports 4.0 or 6.0 seconds at
random, so its rates are off by up to a second's worth, 20 % at 5 s and
10 % at 10 s, in either direction. Each client runs exactly --test-time
seconds, so counts divided by the test time are the rates. Hit ratios and
latencies are not affected.

usage: memtier_json.py REPORT TEST_SECONDS [KEYS_PER_GET]
prints: ops/s keys/s hit-ratio p50-ms p99-ms p99.9-ms
"""
import json
import sys


def rates(path, secs, batch=1):
    stats = json.load(open(path))["ALL STATS"]
    tot, gets = stats["Totals"], stats.get("Gets", {})
    p = tot["Percentile Latencies"]
    ops = tot["Count"] / secs
    get_ops = gets.get("Count", 0) / secs
    # A multi-get of N keys is one memtier op; every other op is one key.
    keys = get_ops * batch + ops - get_ops if batch > 1 else ops
    hits, misses = gets.get("Hits/sec", 0), gets.get("Misses/sec", 0)
    hit = hits / (hits + misses) if hits + misses else 0
    return ops, keys, hit, p["p50.00"], p["p99.00"], p["p99.90"]


if __name__ == "__main__":
    ops, keys, hit, p50, p99, p999 = rates(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    print(f"{ops:.0f} {keys:.0f} {hit:.3f} {p50:.3f} {p99:.3f} {p999:.3f}")
