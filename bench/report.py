#!/usr/bin/env python3
"""Regenerates the generated part of bench/RESULTS.md and the plots from the
CSVs the bench scripts write: results/memtier.csv (run-memtier.sh),
results/resources.csv (resources.sh), results/api-compare.csv
(api-compare.sh) and results/live.csv (live.sh, its own block). Hand-written
sections outside the markers are kept.

    python3 bench/report.py

Plots (PNG, gnuplot): throughput vs connections, p99 vs throughput, keys/s vs
batch size. Standard library only.
"""
import csv
import os
import platform
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RES = os.path.join(HERE, "results")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
BEGIN, END = "<!-- generated:begin (bench/report.py) -->", "<!-- generated:end -->"
LIVE_BEGIN, LIVE_END = "<!-- live:begin (bench/report.py, from results/live.csv) -->", "<!-- live:end -->"
LIVE_ANCHOR = "## Live cluster: first figures"


def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def read_csv(name):
    path = os.path.join(RES, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:  # a CSV written before the column was renamed says round
        if "round" in r and "trial" not in r:
            r["trial"] = r.pop("round")
    return rows


def machine():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    mc = sh("memcached", "-V")
    tw = sh("nutcracker", "--version") or sh("sh", "-c", "nutcracker -V 2>&1")
    mt = sh("sh", "-c", "memtier_benchmark --version 2>&1 | head -1")
    return [
        ("CPU", f"{cpu}, {os.cpu_count()} cores (shared with the load generators)"),
        ("memory", mem),
        ("kernel", platform.release()),
        ("Go", sh("go", "env", "GOVERSION")),
        ("memcached", mc or "not installed"),
        ("twemproxy", tw.splitlines()[0] if tw else "not installed"),
        ("memtier_benchmark", mt or "not installed"),
    ]


def med(vals):
    return statistics.median(vals) if vals else 0.0


def memtier_section(rows):
    if not rows:
        return ["No memtier runs recorded yet: `bench/run-memtier.sh`.", ""]
    latest = {}
    for r in rows:  # the newest run of each workload
        latest[r["workload"]] = max(latest.get(r["workload"], ""), r["date"])
    rows = [r for r in rows if r["date"] == latest[r["workload"]]]
    order = []
    for r in rows:
        if r["workload"] not in order:
            order.append(r["workload"])
    out = ["Each workload: memtier_benchmark with identical settings against each",
           "target, alternated within one run (A B C A B C), key space preloaded.",
           "Medians of the trials, with the min-max spread of the ratios.", ""]
    out.append("| workload | target | ops/s | keys/s | p50 ms | p99 ms | p99.9 ms | ndbgate / peer, throughput | ndbgate / peer, p99 |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for w in order:
        wr = [r for r in rows if r["workload"] == w]
        by = {}
        for r in wr:
            by.setdefault(r["target"], {}).setdefault(int(r["trial"]), r)
        ng = by.get("ndbgate", {})
        for target in ("ndbgate", "memcached", "twemproxy"):
            runs = by.get(target)
            if not runs:
                continue
            ops = [float(r["ops_per_s"]) for r in runs.values()]
            keys = [float(r["keys_per_s"]) for r in runs.values()]
            p50 = [float(r["p50_ms"]) for r in runs.values()]
            p99 = [float(r["p99_ms"]) for r in runs.values()]
            p999 = [float(r["p999_ms"]) for r in runs.values()]
            ratio = ""
            p99ratio = ""
            if target != "ndbgate":
                tr = [float(ng[k]["ops_per_s"]) / float(runs[k]["ops_per_s"]) for k in runs if k in ng and float(runs[k]["ops_per_s"])]
                pr = [float(ng[k]["p99_ms"]) / float(runs[k]["p99_ms"]) for k in runs if k in ng and float(runs[k]["p99_ms"])]
                if tr:
                    ratio = f"**{med(tr):.2f}x** ({min(tr):.2f}-{max(tr):.2f})"
                if pr:
                    p99ratio = f"{med(pr):.2f} ({min(pr):.2f}-{max(pr):.2f})"
            out.append(f"| {w} | {target} | {med(ops):,.0f} | {med(keys):,.0f} | {med(p50):.3f} | {med(p99):.3f} | {med(p999):.3f} | {ratio} | {p99ratio} |")
    out.append("")
    out.append("\"ndbgate / peer, throughput\" is ndbgate's ops/s over the peer's (above 1: ndbgate")
    out.append("faster); \"ndbgate / peer, p99\" is ndbgate's p99 over the peer's (below 1: ndbgate's")
    out.append("tail shorter). twemproxy speaks only the text protocol.")
    out.append("")
    return out


def resources_section(rows):
    if not rows:
        return ["No resource figures recorded yet: `bench/resources.sh`.", ""]
    out = ["| measure | ndbgate | memcached |", "|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault(r["measure"], {})[r["target"]] = r["value"]
    for m, v in by.items():
        out.append(f"| {m} | {v.get('ndbgate', '')} | {v.get('memcached', '')} |")
    out.append("")
    return out


def write_series(path, series, line):
    """gnuplot data: one block per series, its name first (columnheader)."""
    with open(path, "w") as f:
        for name, byx in series.items():
            f.write(f'"{name}"\n')
            for x in sorted(byx):
                f.write(line(x, byx[x]) + "\n")
            f.write("\n\n")


def plots(mrows, arows):
    if not shutil.which("gnuplot"):
        return ["(gnuplot not installed: no plots.)", ""]
    made = []
    latest = {}
    for r in mrows:
        latest[r["workload"]] = max(latest.get(r["workload"], ""), r["date"])
    sweep = {}
    for r in mrows:
        if r["date"] != latest[r["workload"]] or not r["workload"].startswith("text_1:10_32B_p1_c"):
            continue
        sweep.setdefault(r["target"], {}).setdefault(int(r["conns"]), []).append(r)
    if sweep:
        data = os.path.join(RES, ".conns.dat")
        write_series(data, sweep, lambda c, rs: f"{c} {med([float(r['ops_per_s']) for r in rs]):.0f} {med([float(r['p99_ms']) for r in rs]):.3f}")
        n = len(sweep)
        script = f"""set terminal pngcairo size 800,500
set datafile separator whitespace
set key left top
set output '{RES}/throughput-vs-connections.png'
set title 'memcache text, 1:10, 32 B: throughput vs connections'
set xlabel 'connections'; set ylabel 'ops/s'; set logscale x 2
plot for [i=0:{n - 1}] '{data}' index i using 1:2 with linespoints title columnheader(1)
set output '{RES}/p99-vs-throughput.png'
set title 'memcache text, 1:10, 32 B: p99 latency vs throughput (1-200 connections)'
unset logscale x; set xlabel 'ops/s'; set ylabel 'p99 ms'
plot for [i=0:{n - 1}] '{data}' index i using 2:3 with linespoints title columnheader(1)
"""
        if subprocess.run(["gnuplot"], input=script, text=True, capture_output=True).returncode == 0:
            made += ["throughput-vs-connections.png", "p99-vs-throughput.png"]
        os.remove(data)
    if arows:
        by = {}
        for r in arows:  # RonDB REST: single pk-read requests, then batches
            proto = {"rest-pkread": "rest-rondb", "rest-batch": "rest-rondb"}.get(r["proto"], r["proto"])
            by.setdefault(proto, {}).setdefault(int(r["batch"]), []).append(float(r["keys_per_s"]))
        by = {k: v for k, v in by.items() if len(v) >= 2}
        data = os.path.join(RES, ".batch.dat")
        write_series(data, by, lambda b, keys: f"{b} {med(keys):.0f}")
        n = len(by)
        script = f"""set terminal pngcairo size 800,500
set key left top
set output '{RES}/keys-vs-batch.png'
set title 'keys/s vs keys per request (reads, 4 connections)'
set xlabel 'keys per request'; set ylabel 'keys/s'; set logscale x 10; set logscale y 10
plot for [i=0:{n - 1}] '{data}' index i using 1:2 with linespoints title columnheader(1)
"""
        if n and subprocess.run(["gnuplot"], input=script, text=True, capture_output=True).returncode == 0:
            made.append("keys-vs-batch.png")
        os.remove(data)
    return [f"![{p}](results/{p})" for p in made] + [""]


def spread(vals):
    """Median with the min-max range, as text."""
    if not vals:
        return ""
    return f"**{med(vals):.2f}x** ({min(vals):.2f}-{max(vals):.2f})"


def per_key_us(r, field):
    """CPU microseconds per key: the run's CPU over the keys it served."""
    keys = float(r["keys_per_s"] or 0) * float(r["secs"] or 0)
    cpu = r.get(field) or ""
    return float(cpu) * 1e6 / keys if keys and cpu != "" else None


def fmt_us(vals):
    vals = [v for v in vals if v is not None]
    return f"{med(vals):.1f}" if vals else ""


def live_rows():
    rows = read_csv("live.csv")
    latest = {}
    for r in rows:  # the newest run of each group
        latest[r["group"]] = max(latest.get(r["group"], ""), r["date"])
    return [r for r in rows if r["date"] == latest[r["group"]]]


def by_key(rows, *fields):
    out = {}
    for r in rows:
        out.setdefault(tuple(r[f] for f in fields), []).append(r)
    return out


def trial_ratios(a, b, field="keys_per_s"):
    """Per-trial ratios a/b of two targets' runs, matched by trial."""
    bb = {r["trial"]: float(r[field]) for r in b}
    return [float(r[field]) / bb[r["trial"]] for r in a if r["trial"] in bb and bb[r["trial"]]]


def live_section(rows):
    if not rows:
        return ["No live-cluster runs recorded yet: `bench/live.sh` (see bench/README.md).", ""]
    out = []
    rows = [r for r in rows if r["target"] != "ndbgate-b"]  # a second build: report.py --builds
    groups = by_key(rows, "group")
    out += ["Medians of the trials. CPU is per key served: the gateway's (ndbgate or",
            "ndbmemcache; for flexAsynch its own process, warm-up included) and the data",
            "nodes' (both ndbd processes). Keys per CPU-second counts both.", ""]
    mem = groups.get(("memtier",), [])
    if mem:
        out += ["#### memtier: ndbgate against ndbmemcache (alternated, each started afresh per run)", "",
                "| workload | target | ops/s | keys/s | p50 ms | p99 ms | gateway CPU µs/key | data node CPU µs/key | keys per CPU-s | ndbgate / ndbmemcache, keys/s | ndbgate / ndbmemcache, p99 | ndbgate / ndbmemcache, keys per CPU-s |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        order = []
        for r in mem:
            if r["workload"] not in order:
                order.append(r["workload"])
        w_t = by_key(mem, "workload", "target")
        for w in order:
            ng = w_t.get((w, "ndbgate"), [])
            for target in ("ndbgate", "ndbmemcache"):
                runs = w_t.get((w, target), [])
                if not runs:
                    continue
                ratio = p99r = cpur = ""
                if target == "ndbmemcache":
                    ratio = spread(trial_ratios(ng, runs))
                    p99r = spread(trial_ratios(ng, runs, "p99_ms"))
                    cpur = spread([a / b for a, b in zip(kpcpu(ng), kpcpu(runs)) if b])
                out.append(f"| {w} | {target} | {med([float(r['ops_per_s']) for r in runs]):,.0f} | {med([float(r['keys_per_s']) for r in runs]):,.0f} | "
                           f"{med([float(r['p50_ms']) for r in runs]):.3f} | {med([float(r['p99_ms']) for r in runs]):.3f} | "
                           f"{fmt_us([per_key_us(r, 'gw_cpu_s') for r in runs])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in runs])} | "
                           f"{med(kpcpu(runs)):,.0f} | {ratio} | {p99r} | {cpur} |")
        out.append("")
    api = groups.get(("api",), [])
    if api:
        out += ["#### REST and gRPC on the cluster: keys per request (ndbgate-bench, 4 connections)", "",
                "| front end | keys per request | keys/s | p50 ms | p99 ms | gateway CPU µs/key | data node CPU µs/key |",
                "|---|---|---|---|---|---|---|"]
        for (proto, batch), runs in sorted(by_key(api, "workload", "batch").items(), key=lambda kv: (kv[0][0].replace("pkread", "batch"), int(kv[0][1]))):
            out.append(f"| {proto} | {batch} | {med([float(r['keys_per_s']) for r in runs]):,.0f} | {med([float(r['p50_ms']) for r in runs]):.3f} | "
                       f"{med([float(r['p99_ms']) for r in runs]):.3f} | {fmt_us([per_key_us(r, 'gw_cpu_s') for r in runs])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in runs])} |")
        out.append("")
        wb = by_key(api, "workload", "batch")
        top = str(max(int(r["batch"]) for r in api))
        out += [f"| batch of {top} against single keys | keys/s ratio |", "|---|---|"]
        for name, single, batched in (("REST RonDB batch vs pk-read", ("rest-pkread", "1"), ("rest-batch", top)),
                                      ("REST KV _mget vs GET", ("rest-kv", "1"), ("rest-kv", top)),
                                      ("gRPC KV MultiGet vs Get", ("grpc-kv", "1"), ("grpc-kv", top)),
                                      ("gRPC RonDB Batch vs PKRead", ("grpc-rondb", "1"), ("grpc-rondb", top))):
            out.append(f"| {name} | {spread(trial_ratios(wb.get(batched, []), wb.get(single, [])))} |")
        out.append("")
    co = groups.get(("coalesce",), [])
    if co:
        cfg = by_key(co, "config")
        on, off = cfg.get(("coalesce=on",), []), cfg.get(("coalesce=off",), [])
        out += ["#### Coalescing, 64 memtier clients (1:10, 32 B, pipeline 1)", "",
                "| dispatcher | ops/s | p50 ms | p99 ms | gateway CPU µs/op | data node CPU µs/op |", "|---|---|---|---|---|---|"]
        for name, runs in (("coalescing on", on), ("coalescing off", off)):
            if runs:
                out.append(f"| {name} | {med([float(r['ops_per_s']) for r in runs]):,.0f} | {med([float(r['p50_ms']) for r in runs]):.3f} | "
                           f"{med([float(r['p99_ms']) for r in runs]):.3f} | {fmt_us([per_key_us(r, 'gw_cpu_s') for r in runs])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in runs])} |")
        out += ["", f"On against off, ops/s: {spread(trial_ratios(on, off))}.", ""]
    po = groups.get(("pool",), [])
    if po:
        out += ["#### Cluster connections in the pool (memtier 1:10, 32 B, 16 connections)", "",
                "| workload | pool | ops/s | p99 ms | gateway CPU µs/op | data node CPU µs/op |", "|---|---|---|---|---|---|"]
        for (w, c), runs in sorted(by_key(po, "workload", "config").items()):
            out.append(f"| {w} | {c.split('=')[1]} | {med([float(r['ops_per_s']) for r in runs]):,.0f} | {med([float(r['p99_ms']) for r in runs]):.3f} | "
                       f"{fmt_us([per_key_us(r, 'gw_cpu_s') for r in runs])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in runs])} |")
        out.append("")
    fl = groups.get(("flex",), [])
    if fl:
        out += ["#### flexAsynch: the NDB API from one process (committed reads, 32 transactions in flight per thread)", "",
                "| threads | operations per transaction | reads/s | flexAsynch CPU µs/read | data node CPU µs/read |", "|---|---|---|---|---|"]
        for (c, b), runs in sorted(by_key(fl, "config", "batch").items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
            out.append(f"| {c.split('=')[1]} | {b} | {med([float(r['keys_per_s']) for r in runs]):,.0f} | "
                       f"{fmt_us([per_key_us(r, 'gw_cpu_s') for r in runs])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in runs])} |")
        out.append("")
    lf = groups.get(("likeflex",), [])
    if lf:
        out += ["#### Reads like for like with flexAsynch (alternated, one trial each in turn)", "",
                "flexAsynch: 2 threads, 32 transactions in flight each, of 100 committed reads (against",
                "ndbgate's 100-key gets) or of one (against single gets at pipeline 16), on its own table",
                "(a two-word key, one 32-byte attribute), each thread reading its rows in sequence. ndbgate:",
                "memtier, 2 x 8 connections, on `bench.flexlike` (a VARBINARY(32) key, one",
                "32-byte value) or on `ndbmemcache.demo_table` (a VARCHAR(250) key, which NDB hashes and",
                "compares padded to its full length); keys P:P (each connection its own range, in",
                "sequence, as flexAsynch's threads) or R:R (random). \"Per CPU\" counts the keys a",
                "CPU-second of the gateway (flexAsynch's own process for it) and the data nodes",
                "buys. \"Client\" is the rest of the host's CPU: memtier, which shares the cores;",
                "flexAsynch makes its own load.", "",
                "| reads | target | table, keys | keys/s | gateway CPU µs/key | data node CPU µs/key | client CPU µs/key | of flexAsynch's keys/s | of flexAsynch's, per CPU |",
                "|---|---|---|---|---|---|---|---|---|"]
        # flexAsynch's workload, and ndbgate's against it
        for fw, gw, label in (("mget100", "mget100", "100 a request"), ("get1", "get1_p16", "single keys")):
            flex = [r for r in lf if r["target"] == "flexAsynch" and r["workload"] == fw]
            mine = [r for r in lf if r["target"] == "ndbgate" and r["workload"] == gw]
            if not flex and not mine:
                continue
            if flex:
                out.append(f"| {label} | flexAsynch | its own, in sequence | {med([float(r['keys_per_s']) for r in flex]):,.0f} | "
                           f"{fmt_us([per_key_us(r, 'gw_cpu_s') for r in flex])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in flex])} | "
                           f"{fmt_us([client_us(r) for r in flex])} | | |")
            for (cfg,), runs in by_key(mine, "config").items():
                table, keys = (kv.split("=")[1] for kv in cfg.split())
                out.append(f"| {label} | ndbgate | {table}, {keys} | {med([float(r['keys_per_s']) for r in runs]):,.0f} | "
                           f"{fmt_us([per_key_us(r, 'gw_cpu_s') for r in runs])} | {fmt_us([per_key_us(r, 'ndbd_cpu_s') for r in runs])} | "
                           f"{fmt_us([client_us(r) for r in runs])} | {pct_range(trial_ratios(runs, flex))} | "
                           f"{pct_range(per_cpu_ratios(runs, flex))} |")
        out.append("")
    return out


def client_us(r):
    """CPU µs a key of the host beyond the gateway and data nodes: the load
    generator, mostly."""
    if not r.get("host_cpu_s"):
        return None
    rest = float(r["host_cpu_s"]) - float(r["gw_cpu_s"] or 0) - float(r["ndbd_cpu_s"] or 0)
    keys = float(r["keys_per_s"] or 0) * float(r["secs"] or 0)
    return max(rest, 0) * 1e6 / keys if keys else None


def pct_range(ratios):
    """Per-trial ratios as a median percentage with the range."""
    share = [100 * x for x in ratios]
    return f"**{med(share):.1f} %** ({min(share):.1f}-{max(share):.1f})" if share else ""


def per_cpu_ratios(a, b):
    """Per-trial ratios of keys per CPU-second (kpcpu), matched by trial."""
    bb = {r["trial"]: k for r, k in zip(b, kpcpu(b))}
    return [k / bb[r["trial"]] for r, k in zip(a, kpcpu(a)) if bb.get(r["trial"])]


def kpcpu(runs):
    """Keys per CPU-second of gateway and data nodes, per run."""
    out = []
    for r in runs:
        cpu = float(r["gw_cpu_s"] or 0) + float(r["ndbd_cpu_s"] or 0)
        out.append(float(r["keys_per_s"]) * float(r["secs"]) / cpu if cpu else 0)
    return out


def live_plot(rows):
    """keys/s against keys per request for ndbgate, ndbmemcache and flexAsynch."""
    if not rows or not shutil.which("gnuplot"):
        return []
    series = {}
    for r in rows:
        name = None
        if r["group"] == "memtier" and (r["workload"] == "get1" or r["workload"].startswith("mget")):
            name = f"{r['target']} (memcache get)"
        elif r["group"] == "api" and r["workload"] in ("rest-kv", "grpc-kv"):
            name = f"ndbgate ({r['workload']})"
        elif r["group"] == "flex":
            name = f"flexAsynch ({r['config'].split('=')[1]} thread{'s' if r['config'] != 'threads=1' else ''})"
        if name:
            series.setdefault(name, {}).setdefault(int(r["batch"]), []).append(float(r["keys_per_s"]))
    series = {k: v for k, v in series.items() if len(v) >= 2}
    if not series:
        return []
    data = os.path.join(RES, ".live.dat")
    write_series(data, series, lambda b, keys: f"{b} {med(keys):.0f}")
    script = f"""set terminal pngcairo size 800,500
set key left top
set output '{RES}/live-keys-vs-batch.png'
set title 'Live NDB cluster: keys/s vs keys per request (reads)'
set xlabel 'keys per request (flexAsynch: operations per transaction)'; set ylabel 'keys/s'
set logscale x 10; set logscale y 10
plot for [i=0:{len(series) - 1}] '{data}' index i using 1:2 with linespoints title columnheader(1)
"""
    ok = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True).returncode == 0
    os.remove(data)
    return ["![live-keys-vs-batch.png](results/live-keys-vs-batch.png)", ""] if ok else []


def builds_section(rows):
    """ndbgate-b against ndbgate, per workload, from one live.sh run with NDBGATE_NDB_BIN_B."""
    out = ["| group | workload | config | keys a request | ndbgate ops/s | ndbgate-b ops/s | b / a, ops/s | b / a, p50 | b / a, p99 | b / a, gateway CPU per key |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for (g, w, c, k), runs in by_key(rows, "group", "workload", "config", "batch").items():
        a = [r for r in runs if r["target"] == "ndbgate"]
        b = [r for r in runs if r["target"] == "ndbgate-b"]
        if not a or not b:
            continue
        cpu = lambda rs: [{"trial": r["trial"], "c": per_key_us(r, "gw_cpu_s")} for r in rs if per_key_us(r, "gw_cpu_s")]
        out.append(f"| {g} | {w} | {c} | {k} | {med([float(r['ops_per_s']) for r in a]):,.0f} | {med([float(r['ops_per_s']) for r in b]):,.0f} | "
                   f"{spread(trial_ratios(b, a, 'ops_per_s'))} | {spread(trial_ratios(b, a, 'p50_ms'))} | {spread(trial_ratios(b, a, 'p99_ms'))} | "
                   f"{spread(trial_ratios(cpu(b), cpu(a), 'c'))} |")
    # Each build against ndbmemcache, alternated with both in the same trials.
    vs = ["", "| workload | config | build | keys/s | / ndbmemcache, keys/s | p50 ms (ndbmemcache) | p99 ms (ndbmemcache) |",
          "|---|---|---|---|---|---|---|"]
    for (w, c), runs in by_key([r for r in rows if r["group"] == "memtier"], "workload", "config").items():
        peer = [r for r in rows if r["group"] == "memtier" and r["workload"] == w and r["target"] == "ndbmemcache"]
        if not peer:
            continue
        for build in ("ndbgate", "ndbgate-b"):
            mine = [r for r in runs if r["target"] == build]
            if mine:
                vs.append(f"| {w} | {c} | {build} | {med([float(r['keys_per_s']) for r in mine]):,.0f} | "
                          f"{spread(trial_ratios(mine, peer))} | {med([float(r['p50_ms']) for r in mine]):.3f} ({med([float(r['p50_ms']) for r in peer]):.3f}) | "
                          f"{med([float(r['p99_ms']) for r in mine]):.3f} ({med([float(r['p99_ms']) for r in peer]):.3f}) |")
    return out + (vs if len(vs) > 3 else [])


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--builds":  # live.sh with NDBGATE_NDB_BIN_B
        with open(sys.argv[2]) as f:
            rows = [r for r in csv.DictReader(f) if r["date"] == sys.argv[3]]
        print("\n".join(builds_section(rows)))
        return
    mrows, rrows, arows = read_csv("memtier.csv"), read_csv("resources.csv"), read_csv("api-compare.csv")
    gen = [BEGIN, "", "## Generated by bench/report.py", "", "| | |", "|---|---|"]
    gen += [f"| {k} | {v} |" for k, v in machine()]
    gen += ["", "Commands: `bench/run-memtier.sh` (memtier, `WORKLOADS=all` for the whole",
            "matrix), `bench/resources.sh` (memory and start-up), `bench/api-compare.sh`",
            "(front ends, single key vs batch), then `python3 bench/report.py`.", "",
            "### memtier: ndbgate vs memcached vs twemproxy->memcached", ""]
    gen += memtier_section(mrows)
    gen += ["### Resources", ""] + resources_section(rrows)
    gen += ["### Plots", ""] + plots(mrows, arows)
    gen += [END]
    text = open(RESULTS_MD).read() if os.path.exists(RESULTS_MD) else "# Benchmark results\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + "\n".join(gen) + tail
    else:
        first, _, rest = text.partition("\n")
        text = first + "\n\n" + "\n".join(gen) + "\n" + rest
    rows = live_rows()
    live = [LIVE_BEGIN, "", "### Live cluster: generated tables", "",
            "Commands: `bench/live.sh` (every group; `WORKLOADS=...` for some), then",
            "`python3 bench/report.py`.", ""] + live_section(rows) + live_plot(rows) + [LIVE_END]
    if LIVE_BEGIN in text and LIVE_END in text:
        head, rest = text.split(LIVE_BEGIN, 1)
        text = head + "\n".join(live) + rest.split(LIVE_END, 1)[1]
    elif rows and LIVE_ANCHOR in text:
        head, tail = text.split(LIVE_ANCHOR, 1)
        text = head + "\n".join(live) + "\n\n" + LIVE_ANCHOR + tail
    with open(RESULTS_MD, "w") as f:
        f.write(text)
    print(f"report: wrote {RESULTS_MD}", file=sys.stderr)


if __name__ == "__main__":
    main()
