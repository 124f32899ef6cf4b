#!/usr/bin/env python3
"""Medians of Go benchmark lines repeated with -count=N (what benchstat's centre column is).

    bench_append -count=5 Appender/ | tee out.txt
    bench/medians.py out.txt [--markdown]

Prints, per benchmark name in the order first seen, the number of runs and the median of
each metric ("ns/op", "records/s", ...), and the spread as (max - min) / median of the first
rate or time metric, so the noise of the machine shows next to the value."""
import re
import statistics
import sys


def parse(lines):
    rows = {}
    order = []
    for line in lines:
        if not line.startswith("Benchmark"):
            continue
        parts = line.rstrip("\n").split("\t")
        name = re.sub(r"-\d+$", "", parts[0].strip())
        metrics = {}
        for p in parts[2:]:
            p = p.strip()
            if not p:
                continue
            value, unit = p.split(None, 1)
            metrics[unit] = float(value)
        if name not in rows:
            rows[name] = []
            order.append(name)
        rows[name].append(metrics)
    return order, rows


def fmt(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def main():
    md = "--markdown" in sys.argv
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    lines = []
    for f in files or ["-"]:
        lines += (sys.stdin if f == "-" else open(f)).readlines()
    order, rows = parse(lines)
    units = []
    for n in order:
        for m in rows[n]:
            for u in m:
                if u not in units:
                    units.append(u)
    head = ["benchmark", "runs"] + units + ["spread"]
    if md:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("\t".join(head))
    for n in order:
        cells = [n, str(len(rows[n]))]
        for u in units:
            vals = [m[u] for m in rows[n] if u in m]
            cells.append(fmt(statistics.median(vals)) if vals else "")
        key = "records/s" if any("records/s" in m for m in rows[n]) else "ns/op"
        vals = [m[key] for m in rows[n] if key in m]
        med = statistics.median(vals) if vals else 0
        cells.append(f"±{(max(vals) - min(vals)) / med / 2 * 100:.0f}%" if med else "")
        if md:
            print("| " + " | ".join(cells) + " |")
        else:
            print("\t".join(cells))


if __name__ == "__main__":
    main()
