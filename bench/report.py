#!/usr/bin/env python3
"""Regenerates the generated part of bench/RESULTS.md and the plots from the
CSVs the bench scripts write: results/memtier.csv (run-memtier.sh),
results/resources.csv (resources.sh) and results/api-compare.csv
(api-compare.sh). Hand-written sections outside the markers are kept.

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
        return list(csv.DictReader(f))


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
           "Medians of the rounds, with the min-max spread of the ratios.", ""]
    out.append("| workload | target | ops/s | keys/s | p50 ms | p99 ms | p99.9 ms | ndbgate / peer, throughput | ndbgate / peer, p99 |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for w in order:
        wr = [r for r in rows if r["workload"] == w]
        by = {}
        for r in wr:
            by.setdefault(r["target"], {}).setdefault(int(r["round"]), r)
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
        with open(data, "w") as f:
            for target, byc in sweep.items():
                f.write(f'"{target}"\n')
                for c in sorted(byc):
                    f.write(f"{c} {med([float(r['ops_per_s']) for r in byc[c]]):.0f} {med([float(r['p99_ms']) for r in byc[c]]):.3f}\n")
                f.write("\n\n")
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
        data = os.path.join(RES, ".batch.dat")
        with open(data, "w") as f:
            for proto, byb in by.items():
                if len(byb) < 2:
                    continue
                f.write(f'"{proto}"\n')
                for b in sorted(byb):
                    f.write(f"{b} {med(byb[b]):.0f}\n")
                f.write("\n\n")
        n = sum(1 for b in by.values() if len(b) >= 2)
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


def main():
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
    with open(RESULTS_MD, "w") as f:
        f.write(text)
    print(f"report: wrote {RESULTS_MD}", file=sys.stderr)


if __name__ == "__main__":
    main()
