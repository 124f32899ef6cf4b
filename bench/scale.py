#!/usr/bin/env python3
"""libvarlog and Varlog's Go client at the scale of a real topic (issue 37): many log
streams, many producers, many readers, many handles, on the same real Varlog cluster.

    flock /tmp/varlog-real-cluster.lock bench/scale.py [--quick] [--rounds N] [--out DIR]
        [--cluster-env FILE] [--hogs N] [--exact-bytes 1g] (--help: every option)
    (also: bench/side-by-side.py --scale ...)

For each k of --write-ks, --read-ks and --handles-k (default 8, 32, 256 and 64; --quick: 8
only) it starts a cluster of 4 storage nodes, replication factor 2, 1 topic of k log
streams (scripts/varlog-cluster.sh; the time it took is printed), runs what that k is in,
and stops it; --cluster-env FILE runs everything against a running cluster instead, at its k.

Writes (k of --write-ks): for each record size (--sizes, 128 and 4096 B) and producer count
(--producers, 1 4 16), with batch 100 and depth 8 (--batch, --depth), one after the other
in an order reversed from round to round:
  C topic   bench_append -logstream 0 -producers P: P threads appending one record per call
            to one topic-wide appender (appender.batch.max.records B, pipeline.depth D per
            log stream);
  C calls   the same appender, -call B: each call hands it B records, as Go's benchmark
            hands its appenders whole batches (AppendBatch);
  C ref     the topic-wide appender with -ref: varlog_appender_append_ref, the records'
            bytes sent from where they are instead of copied into the transmit queue;
  C per-ls  bench_append -appenders per-ls -producers P: one client, one appender bound to
            each of the k log streams, each producer appending runs of B records to one
            appender then the next;
  C shared  the same with -X appender.threads=--shared-threads (2): the k appenders share
            that many threads;
  Go        benchmark --target T:L for each of the k log streams, --appenders 1
            --batch-size B --pipeline-size D (one client and one goroutine calling AppendBatch
            per log stream: k x D batches in flight at most, as both C shapes). Go's offered
            load does not depend on P: it runs once per (k, size) and round, and its figures
            stand beside every P.
  floor     bench_server_append -logstream 0 AppendFloor: the same requests (B records of the
            size, D in flight per log stream) on bare gRPC-core Append streams to every log
            stream's primary, one thread, no library: what gRPC core and the kernel cost any
            client for them. Once per (k, size) and round, as Go.
  held      the floor with -hold --hold-mib: each request first copied into the next place
            of a ring of that many MiB (64, appender.queue.max.bytes's default) and sent from
            there, the place given back when the request is answered: the copy any client
            that takes its records' bytes and keeps them for a retry makes, into memory a
            queue's worth of requests wrote before. Once per (k, size) and round, as Go.
Reads (k of --read-ks): the topic is first filled to --read-entries entries (bench_subscribe
fills the shortfall with a topic-wide appender, 100-byte records; what the writes stored
counts); then, per round:
  topic-wide  Go: benchmark --target T:0 --subscribers 1 for --read-seconds; C:
              bench_subscribe -nofill Subscribe/iter reading as many entries from the same
              first GLSN (at most --read-entries);
  each        Go: benchmark with --target T:L --subscribers 1 for the first --subs (8) log
              streams (SubscribeTo, one client each); C: bench_subscribe -nofill -subs 8
              SubscribeToEach (one client, 8 varlog_subscribe_to handler subscriptions) for
              as many entries, split evenly;
  each-shared C only, right after "each" and against its Go run: the same 8 subscriptions
              on --shared-threads threads (subscribe.handler.threads);
  each-floor  C only, against the same Go run: bench_subscribe GrpcFloorEach, the same 8
              SubscribeTo streams on bare gRPC-core calls polled by one thread (the floor).
Handles (k = --handles-k, 64 by default: one log stream per handle): bench_handles -shape
bound (--handles 64 bound appenders and 64 handler subscriptions tailing their log streams,
one record per appender every 1/--handle-rate s), the same on --shared-threads threads
(appender.threads and subscribe.handler.threads), and -shape topic (the same records
through one topic-wide appender and one topic-wide subscription), C only (Go's benchmark
cannot pace its appends).
Exactness (--exact-bytes, default 0 = skip; k = --exact-k, 32): bench_exact writes that much
payload through every log stream (an appender per log stream) and reads it back topic-wide,
checking every record.

Columns: records/s (entries/s); client CPU µs per record (entry), user + system of the
client process alone over its steady window (C: the bench's round, getrusage; Go:
/proc/PID/stat from its first to its second-to-last report); max RSS of the process
(ru_maxrss from os.wait4); threads, the most /proc/PID/task entries seen (sampled every
0.2 s; for Go its OS threads); C/Go ratios of rate and CPU. Medians of --rounds rounds.
--quick: a reduced grid and short runs, for smoke runs only: its figures are not
measurements. Every run's output goes to DIR/raw.txt (--out, default a new /tmp dir).

Needs the real Varlog binaries (../shared/varlog/README.md) and bench_append,
bench_server_append, bench_subscribe, bench_handles (and bench_exact) built. Only one real
cluster should run on a small machine at a time: wrap the run in flock as above."""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_bench  # noqa: E402
from cluster_bench import ROOT, fmt, log, med, ratio, run_c, run_go, run_process  # noqa: E402

WHO = "scale"
SNS, RF = 4, 2

# Defaults of the full run and of --quick; an option given on the command line wins.
FULL = {"rounds": 3, "write_ks": "8,32", "read_ks": "8,32,256", "handles_k": 64,
        "sizes": "128,4096", "producers": "1,4,16", "benchtime": "3s", "go_seconds": 10,
        "report_interval": "1s", "read_entries": 2000000, "read_seconds": 8, "each_ks": "8,32",
        "handles_seconds": 10, "handles_warmup": 2}
QUICK = {"rounds": 1, "write_ks": "8", "read_ks": "8", "handles_k": 8,
         "sizes": "128,4096", "producers": "1,16", "benchtime": "1s", "go_seconds": 4,
         "report_interval": "500ms", "read_entries": 400000, "read_seconds": 3, "each_ks": "8",
         "handles_seconds": 3, "handles_warmup": 1}


def ints(v):
    return [int(x) for x in str(v).replace(",", " ").split() if x]


def cluster_flags(cluster):
    """The flags that point a C bench program at the cluster's topic."""
    return ["-mr", ",".join(cluster.mrs), "-topic", str(cluster.topic)]


# ---- writes -----------------------------------------------------------------------------


def append_row(args, prog, flags, row, out):
    """One append row of bench_append or bench_server_append (the same metric names)."""
    m = run_c(args, prog, flags, row, out, who=WHO)
    if not m:
        return None
    return {"rate": m["records/s"], "cpu_us": m["cpu-us/record"],
            "csw": m.get("ctxsw/request"), "batch": m.get("records/batch"),
            "threads": m["proc-threads"], "rss_mb": m["proc-maxrss-MB"]}


def c_write(args, cluster, shape, size, producers, out):
    flags = cluster_flags(cluster) + ["-size", str(size), "-producers", str(producers),
                                      f"-benchtime={args.benchtime}"]
    for kv in args.c_conf:
        flags += ["-X", kv]
    call = ""
    if shape == "call":
        flags += ["-call", str(args.batch)]
        call = f"/call={args.batch}"
    if shape == "ref":
        flags += ["-ref"]
        call = "/ref"
    if shape in ("perls", "shared"):
        flags += ["-appenders", "per-ls"]
        name = "AppenderPerLS"
        if shape == "shared":
            flags += ["-X", f"appender.threads={args.shared_threads}"]
    else:
        flags += ["-logstream", "0"]
        name = "Appender"
    row = (f"-bench=^Benchmark{name}/size={size}/batch={args.batch}/depth={args.depth}"
           f"/producers={producers}{call}$")
    return append_row(args, "bench_append", flags, row, out)


def go_write(args, cluster, size, out):
    extra = []
    for ls in cluster.log_streams:
        extra += ["--target", f"{cluster.topic}:{ls}"]
    extra += ["--appenders", "1", "--msg-size", str(size), "--batch-size", str(args.batch),
              "--pipeline-size", str(args.depth), "--subscribers", "0",
              "--duration", f"{args.go_seconds}s"]
    return run_go(args, cluster, extra, "append", out, size=size, who=WHO)


def floor_write(args, cluster, size, out, held=False):
    """bench_server_append's AppendFloor over every log stream: the same requests on bare
    gRPC-core streams, one thread, no library (no producer, no callback; no copy, or with
    held one copy of each request into a ring of --hold-mib)."""
    flags = cluster_flags(cluster) + ["-logstream", "0", "-size", str(size),
                                      f"-benchtime={args.benchtime}"]
    hold = ""
    if held:
        flags += ["-hold", str(args.hold_mib)]
        hold = f"/hold={args.hold_mib}MiB"
    row = (f"-bench=^BenchmarkAppendFloor/size={size}/batch={args.batch}/depth={args.depth}"
           f"/ls={len(cluster.log_streams)}{hold}$")
    return append_row(args, "bench_server_append", flags, row, out)


# C's shapes: one topic-wide appender; the same with calls of --batch records (as Go's
# benchmark hands over whole batches); an appender per log stream, each on its own thread;
# the same on --shared-threads threads (appender.threads); the topic-wide appender with
# varlog_appender_append_ref (no copy).
WRITE_SHAPES = ("topic", "call", "perls", "shared", "ref")


def write_rounds(args, cluster, k, out, results):
    """results[(k, size, producers)]: one dict per round, {"topic", "call", "perls", "shared",
    "go", "floor", "held"}."""
    shapes = [s for s in WRITE_SHAPES if s in args.shapes.split(",")]
    for rnd in range(args.rounds):
        for size in ints(args.sizes):
            steps = [("go", None), ("floor", None), ("held", None)] + [(s, p) for p in ints(args.producers)
                                                       for s in shapes]
            if rnd % 2:
                steps.reverse()
            got = {}
            for who, p in steps:
                log(f"{WHO}: k={k} round {rnd + 1}/{args.rounds}: write {size} B "
                    + ({"go": "Go", "floor": "floor", "held": "floor held"}.get(who)
                       or f"C {who} producers={p}"))
                if who == "go":
                    got["go"] = go_write(args, cluster, size, out)
                elif who in ("floor", "held"):
                    got[who] = floor_write(args, cluster, size, out, held=who == "held")
                else:
                    got[(who, p)] = c_write(args, cluster, who, size, p, out)
                out.flush()
            for p in ints(args.producers):
                results.setdefault((k, size, p), []).append(
                    dict({s: got.get((s, p)) for s in WRITE_SHAPES if s in shapes},
                         go=got.get("go"), floor=got.get("floor"), held=got.get("held")))


# ---- reads ------------------------------------------------------------------------------


def preload(args, cluster, k, out):
    """Fills the topic to --read-entries entries from its first (bench_subscribe's fill)."""
    log(f"{WHO}: k={k}: filling the topic to {args.read_entries:,} entries")
    t0 = time.monotonic()
    m = run_c(args, "bench_subscribe",
              cluster_flags(cluster) + [f"-benchtime={args.read_entries}x"], "Subscribe/iter/",
              out, who=WHO)
    log(f"{WHO}: k={k}: filled in {time.monotonic() - t0:.0f} s")
    return m is not None


def c_read(args, cluster, row, n, out, extra=()):
    m = run_c(args, "bench_subscribe", cluster_flags(cluster) + ["-nofill", f"-benchtime={n}x"]
              + list(extra), row, out, who=WHO)
    if not m:
        return None
    return {"rate": m["entries/s"], "cpu_us": m["cpu-us/entry"],
            "csw": m.get("ctxsw/1000entries"), "n": n, "threads": m["proc-threads"],
            "rss_mb": m["proc-maxrss-MB"]}


def read_rounds(args, cluster, k, out, results):
    """results[("topic"|"each", k)]: one dict per round, {"c", "go"}."""
    subs = min(args.subs, k)
    last_each_n, last_each_go = 0, None
    for rnd in range(args.rounds):
        for form in ("topic", "each", "each-shared", "each-floor"):
            log(f"{WHO}: k={k} round {rnd + 1}/{args.rounds}: read {form}")
            if form != "topic" and k not in ints(args.each_ks):
                continue
            if form in ("each-shared", "each-floor"):
                # The same 8 subscriptions on --shared-threads threads
                # (subscribe.handler.threads), or the same streams on bare gRPC-core calls
                # polled by one thread (GrpcFloorEach), against the Go run of "each" in this
                # round.
                if form == "each-shared":
                    c = c_read(args, cluster, "SubscribeToEach/", last_each_n, out,
                               ["-subs", str(subs), "-X",
                                f"subscribe.handler.threads={args.shared_threads}"])
                else:
                    c = c_read(args, cluster, "GrpcFloorEach/", last_each_n, out,
                               ["-subs", str(subs)])
                results.setdefault((form, k), []).append({"c": c, "go": last_each_go})
                out.flush()
                continue
            extra = ["--appenders", "0", "--subscribers", "1", "--subscribe-size",
                     str(args.go_subscribe_size), "--duration", f"{args.read_seconds}s"]
            if form == "topic":
                targets = ["--target", f"{cluster.topic}:0"]
                cap = args.read_entries
            else:
                targets = []
                for ls in cluster.log_streams[:subs]:
                    targets += ["--target", f"{cluster.topic}:{ls}"]
                # What the first log streams hold of the fill (a topic-wide appender fills
                # them unevenly), unless Go says what each holds.
                cap = int(args.read_entries * subs / k * 0.5)
            # Go first: the C reader reads as many entries as it did (the same range).
            g = run_go(args, cluster, targets + extra, "subscribe", out, who=WHO,
                       allow_eof=form == "each")
            if form == "each" and g and len(g["ranges"]) == subs:
                cap = subs * min(last - first + 1 for first, last in g["ranges"])
            n = min(int(g["total"]), cap) if g else cap
            if form == "topic":
                c = c_read(args, cluster, "Subscribe/iter/", n, out)
            else:
                c = c_read(args, cluster, "SubscribeToEach/", n, out, ["-subs", str(subs)])
                last_each_n, last_each_go = n, g
            results.setdefault((form, k), []).append({"c": c, "go": g})
            out.flush()


# ---- handles ----------------------------------------------------------------------------


def handles_rounds(args, cluster, k, out, results):
    """results[(shape, k)]: one dict per round, {"c"}."""
    for rnd in range(args.rounds):
        shapes = ["bound", "shared", "topic"]
        if rnd % 2:
            shapes.reverse()
        for shape in shapes:
            log(f"{WHO}: k={k} round {rnd + 1}/{args.rounds}: {args.handles} handles, {shape}")
            flags = cluster_flags(cluster) + ["-shape", "topic" if shape == "topic" else "bound",
                                          "-handles", str(args.handles),
                                          "-rate", str(args.handle_rate),
                                          "-warmup", str(args.handles_warmup),
                                          "-seconds", str(args.handles_seconds)]
            if shape == "shared":
                flags += ["-X", f"appender.threads={args.shared_threads}",
                          "-X", f"subscribe.handler.threads={args.shared_threads}"]
            m = run_c(args, "bench_handles", flags, None, out, who=WHO)
            c = None
            if m:
                c = {"rate": m["records/s"], "entries": m["entries/s"],
                     "cpu_ms_s": m["cpu-us/s"] / 1000, "cpu_us": m["cpu-us/record"],
                     "csw_s": m["ctxsw/s"], "threads": m["threads"], "rss_mb": m["maxrss-MB"]}
            results.setdefault((shape, k), []).append({"c": c})
            out.flush()


def exactness(args, cluster, k, out):
    log(f"{WHO}: k={k}: exactness check of {args.exact_bytes} through every log stream")
    t0 = time.monotonic()
    r = run_process([os.path.join(args.bench_dir, "bench_exact")] + cluster_flags(cluster)
                    + ["-bytes", args.exact_bytes], out, timeout=args.c_timeout * 4)
    kv = {}
    for line in r.lines:
        for tok in line.split():
            if "=" in tok:
                key, v = tok.split("=", 1)
                kv.setdefault(key, v)
    verdict = next((ln.strip() for ln in r.lines if ln.startswith("exact=")), "exact=no verdict")
    return {"k": k, "bytes": args.exact_bytes, "rc": r.rc, "verdict": verdict,
            "seconds": time.monotonic() - t0, "lines": [ln.strip() for ln in r.lines
                                                          if ln.startswith(("write", "read="))]}


# ---- the table --------------------------------------------------------------------------


def md_table(cols, rows):
    """A Markdown table: cols are (header, cell) pairs, cell(row) the text of row's cell."""
    return (["| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
            + ["| " + " | ".join(cell(row) for _, cell in cols) + " |" for row in rows])


# The cells of a write row ((k, size, producers), [one dict per round]): a shape's median,
# or the ratio of two shapes' medians.
def w_key(i):
    return lambda row: str(row[0][i])


def w_med(who, key, digits=2):
    return lambda row: fmt(med(row[1], who, key), digits)


def w_ratio(a, b, key):
    return lambda row: fmt(ratio(med(row[1], a, key), med(row[1], b, key)))


W_KEYS = [("k", w_key(0)), ("size", w_key(1)), ("producers", w_key(2))]


def write_table(results, args):
    rows = sorted(results.items())
    cpu, rate = "cpu_us", "rate"
    lines = md_table(W_KEYS + [
        ("records/s C topic", w_med("topic", rate)), ("C per-ls", w_med("perls", rate)),
        ("Go (k targets x 1 appender)", w_med("go", rate)),
        ("CPU µs/record C topic", w_med("topic", cpu)), ("C per-ls", w_med("perls", cpu)),
        ("Go", w_med("go", cpu)), ("C/Go CPU topic", w_ratio("topic", "go", cpu)),
        ("per-ls", w_ratio("perls", "go", cpu)), ("C/Go rate topic", w_ratio("topic", "go", rate)),
        ("per-ls", w_ratio("perls", "go", rate)),
        ("max RSS MB C topic", w_med("topic", "rss_mb", 0)),
        ("C per-ls", w_med("perls", "rss_mb", 0)), ("Go", w_med("go", "rss_mb", 0)),
        ("threads C topic", w_med("topic", "threads", 0)),
        ("C per-ls", w_med("perls", "threads", 0)), ("Go", w_med("go", "threads", 0))], rows)
    ran = args.shapes.split(",")
    if "shared" in ran:
        lines += ["", f"An appender per log stream, on {args.shared_threads} shared thread(s) "
                  "(appender.threads), against the same shape on a thread each and against Go:", ""]
        lines += md_table(W_KEYS + [
            ("records/s C per-ls shared", w_med("shared", rate)),
            ("C per-ls", w_med("perls", rate)),
            ("Go", w_med("go", rate)), ("CPU µs/record C per-ls shared", w_med("shared", cpu)),
            ("C per-ls", w_med("perls", cpu)), ("Go", w_med("go", cpu)),
            ("C/Go CPU shared", w_ratio("shared", "go", cpu)),
            ("C/Go rate shared", w_ratio("shared", "go", rate)),
            ("shared/own CPU", w_ratio("shared", "perls", cpu)),
            ("max RSS MB C per-ls shared", w_med("shared", "rss_mb", 0)),
            ("threads C per-ls shared", w_med("shared", "threads", 0))], rows)
    lines += ["", "One topic-wide appender against the floor (bench_server_append's AppendFloor "
              "over every log stream: the same requests on bare gRPC-core streams, one thread, no "
              f"library) and Go; C calls of {args.batch}: the same appender handed whole batches, "
              "as Go's benchmark hands them:", ""]
    lines += md_table(W_KEYS + [
        ("CPU µs/record C topic", w_med("topic", cpu)), ("C calls of B", w_med("call", cpu)),
        ("floor", w_med("floor", cpu)), ("Go", w_med("go", cpu)),
        ("C topic/floor", w_ratio("topic", "floor", cpu)),
        ("C calls/floor", w_ratio("call", "floor", cpu)), ("floor/Go", w_ratio("floor", "go", cpu)),
        ("C topic/Go", w_ratio("topic", "go", cpu)), ("C calls/Go", w_ratio("call", "go", cpu)),
        ("records/s C calls", w_med("call", rate)), ("floor", w_med("floor", rate))], rows)
    lines += ["", f"The floor held (the same, each request first copied into a ring of "
              f"{args.hold_mib} MiB, as the appender's queue bound, and kept there until its answer: "
              "the least a client that copies its records spends) against C and Go:", ""]
    lines += md_table(W_KEYS + [
        ("CPU µs/record C topic", w_med("topic", cpu)), ("C calls of B", w_med("call", cpu)),
        ("floor held", w_med("held", cpu)), ("floor", w_med("floor", cpu)),
        ("Go", w_med("go", cpu)), ("held/floor", w_ratio("held", "floor", cpu)),
        ("held/Go", w_ratio("held", "go", cpu)), ("C topic/held", w_ratio("topic", "held", cpu)),
        ("C calls/held", w_ratio("call", "held", cpu)),
        ("records/s floor held", w_med("held", rate)),
        ("max RSS MB floor held", w_med("held", "rss_mb", 0))], rows)
    if "ref" in ran:
        lines += ["", "The topic-wide appender with varlog_appender_append_ref (C ref: the records' "
                  "bytes sent from where they are, every record the same bytes as in Go's benchmark) "
                  "against the same with the copy (C topic), the floor and Go:", ""]
        lines += md_table(W_KEYS + [
            ("CPU µs/record C topic", w_med("topic", cpu)), ("C ref", w_med("ref", cpu)),
            ("floor", w_med("floor", cpu)), ("Go", w_med("go", cpu)),
            ("C ref/topic", w_ratio("ref", "topic", cpu)),
            ("C ref/floor", w_ratio("ref", "floor", cpu)), ("C ref/Go", w_ratio("ref", "go", cpu)),
            ("records/s C ref", w_med("ref", rate)), ("C topic", w_med("topic", rate)),
            ("Go", w_med("go", rate))], rows)
    return "\n".join(lines)


def read_table(results, shared_threads):
    lines = ["| read | k | entries/s C | Go | CPU µs/entry C | Go | C/Go rate | C/Go CPU "
             "| max RSS MB C | Go | threads C | Go | entries C read |",
             "|" + "---|" * 13]
    names = {"topic": "1 topic-wide subscription", "each": "1 subscription per log stream",
             "each-shared": "1 subscription per log stream", "each-floor": "floor"}
    for (form, k), rs in sorted(results.items(), key=lambda x: (x[0][0] != "topic", x[0][1])):
        rate = {w: med(rs, w, "rate") for w in ("c", "go")}
        cpu = {w: med(rs, w, "cpu_us") for w in ("c", "go")}
        label = names[form]
        if form != "topic":
            targets = med(rs, "go", "targets")
            label = f"{int(targets) if targets else '?'} subscriptions of 1 log stream each"
            if form == "each-shared":
                label += f", on {shared_threads} shared thread(s)"
            if form == "each-floor":
                label = (f"the same {int(targets) if targets else '?'} streams on bare gRPC-core "
                         "calls, one thread (GrpcFloorEach: the floor)")
        lines.append(
            f"| {label} | {k} | {fmt(rate['c'])} | {fmt(rate['go'])} | {fmt(cpu['c'])} "
            f"| {fmt(cpu['go'])} | {fmt(ratio(rate['c'], rate['go']))} "
            f"| {fmt(ratio(cpu['c'], cpu['go']))} | {fmt(med(rs, 'c', 'rss_mb'), 0)} "
            f"| {fmt(med(rs, 'go', 'rss_mb'), 0)} | {fmt(med(rs, 'c', 'threads'), 0)} "
            f"| {fmt(med(rs, 'go', 'threads'), 0)} | {fmt(med(rs, 'c', 'n'))} |")
    return "\n".join(lines)


def handles_table(results, args):
    lines = ["| C client, one process | k | records/s | entries/s | client CPU ms/s "
             "| CPU µs/record | ctxsw/s | threads | max RSS MB |",
             "|" + "---|" * 9]
    names = {"bound": f"{args.handles} bound appenders + {args.handles} handler "
             f"subscriptions, {args.handle_rate} records/s each",
             "shared": f"the same {args.handles} + {args.handles} handles on "
             f"{args.shared_threads} shared thread(s) each (appender.threads, "
             "subscribe.handler.threads)",
             "topic": "the same records: 1 topic-wide appender + 1 topic-wide subscription"}
    for (shape, k), rs in sorted(results.items()):
        lines.append(
            f"| {names[shape]} | {k} | {fmt(med(rs, 'c', 'rate'))} "
            f"| {fmt(med(rs, 'c', 'entries'))} | {fmt(med(rs, 'c', 'cpu_ms_s'))} "
            f"| {fmt(med(rs, 'c', 'cpu_us'))} | {fmt(med(rs, 'c', 'csw_s'), 0)} "
            f"| {fmt(med(rs, 'c', 'threads'), 0)} | {fmt(med(rs, 'c', 'rss_mb'), 0)} |")
    return "\n".join(lines)


def per_round(writes, reads, handles):
    def cell(x, unit):
        return "failed" if not x else f"{fmt(x['rate'])}/s {fmt(x.get('cpu_us'))} µs/{unit}"
    lines = []
    for (k, size, p), rs in sorted(writes.items()):
        for i, r in enumerate(rs):
            lines.append(f"write k={k} {size} B P={p} round {i + 1}  "
                         + "  ".join(f"{w}: {cell(r[w], 'record')}"
                                     for w in WRITE_SHAPES + ("go", "floor", "held") if w in r))
    for (form, k), rs in sorted(reads.items()):
        for i, r in enumerate(rs):
            lines.append(f"read {form} k={k} round {i + 1}  "
                         + "  ".join(f"{w}: {cell(r[w], 'entry')}" for w in ("c", "go")))
    for (shape, k), rs in sorted(handles.items()):
        for i, r in enumerate(rs):
            lines.append(f"handles {shape} k={k} round {i + 1}  c: {cell(r['c'], 'record')}")
    return "\n".join(lines)


# ---- main -------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="a reduced grid and short runs, for smoke runs (not measurements): "
                    + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    ap.add_argument("--bench-dir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--varlog-bin", default=os.environ.get("VARLOG_BIN"),
                    help="the unpacked Varlog binaries (default $VARLOG_BIN, build-varlog-bin "
                    "if it exists, else what `scripts/varlog-cluster.sh bin` unpacks)")
    ap.add_argument("--cluster-env", help="run everything against the running cluster this "
                    "file describes (at its k), instead of starting clusters; a part whose "
                    "option is set empty is left out (--write-ks '', --read-ks '', "
                    "--handles-k 0)")
    ap.add_argument("--sn-arg", action="append", default=[],
                    help="an extra varlogsn argument (repeatable)")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--write-ks", help=f"log streams of the write rows ({FULL['write_ks']})")
    ap.add_argument("--read-ks", help=f"log streams of the read rows ({FULL['read_ks']})")
    ap.add_argument("--handles-k", type=int,
                    help=f"log streams of the handles rows ({FULL['handles_k']}; 0 = skip)")
    ap.add_argument("--sizes", help=f"record sizes of the writes ({FULL['sizes']})")
    ap.add_argument("--producers", help=f"C producer threads ({FULL['producers']})")
    ap.add_argument("--shapes", default=",".join(WRITE_SHAPES),
                    help="C write shapes to run, of " + ",".join(WRITE_SHAPES) + " (all)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--c-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration property of every C write shape (bench_append -X; "
                    "repeatable), e.g. appender.queue.max.bytes=50331648")
    ap.add_argument("--hold-mib", type=int, default=64,
                    help="the held floor's ring, MiB (64: appender.queue.max.bytes's default)")
    ap.add_argument("--benchtime", help=f"bench_append's -benchtime ({FULL['benchtime']})")
    ap.add_argument("--go-seconds", type=int, help=f"Go's --duration ({FULL['go_seconds']})")
    ap.add_argument("--report-interval", help="Go's --report-interval "
                    f"({FULL['report_interval']})")
    ap.add_argument("--read-entries", type=int,
                    help=f"entries stored before the reads ({FULL['read_entries']})")
    ap.add_argument("--read-seconds", type=int,
                    help=f"Go reader's --duration ({FULL['read_seconds']})")
    ap.add_argument("--subs", type=int, default=8, help="subscriptions of one log stream each")
    ap.add_argument("--each-ks", help="k of --read-ks with the --subs row too "
                    f"({FULL['each_ks']})")
    ap.add_argument("--go-subscribe-size", type=int, default=1000,
                    help="Go's --subscribe-size: GLSNs per topic-wide Subscribe call (default "
                    "1000, the benchmark's own: it opens k streams again every 1000 entries; "
                    "Go's Subscribe allocates a channel of that many results, so 1000000 "
                    "cost it 391 MB RSS at k=8 and 803 entries/s at k=256)")
    ap.add_argument("--handles", type=int, default=64)
    ap.add_argument("--shared-threads", type=int, default=2,
                    help="appender.threads and subscribe.handler.threads of the shared rows "
                    "(per-ls writes, 8 single-log-stream reads, handles): 2")
    ap.add_argument("--handle-rate", type=int, default=100, help="records/s per handle")
    ap.add_argument("--handles-seconds", type=int)
    ap.add_argument("--handles-warmup", type=int)
    ap.add_argument("--exact-bytes", default="0",
                    help="payload of the exactness check (e.g. 50m, 1g; 0 = skip)")
    ap.add_argument("--exact-k", type=int, default=32)
    ap.add_argument("--hogs", type=int, default=0, help="busy loops beside the run")
    ap.add_argument("--c-timeout", type=int, default=600, help="seconds per C run (600)")
    ap.add_argument("--out", help="directory for every run's output (default: new in /tmp)")
    args = ap.parse_args()
    for key, v in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, v)
    if not args.varlog_bin:
        args.varlog_bin = cluster_bench.default_varlog_bin()
    progs = ["bench_append", "bench_subscribe", "bench_handles"]
    if args.exact_bytes != "0":
        progs.append("bench_exact")
    for prog in progs:
        if not os.access(os.path.join(args.bench_dir, prog), os.X_OK):
            sys.exit(f"{WHO}: no {prog} in {args.bench_dir} (cmake --build ... --target "
                     f"{' '.join(progs)}; --bench-dir DIR)")
    if not os.access(os.path.join(args.varlog_bin, "benchmark"), os.X_OK):
        sys.exit(f"{WHO}: no Varlog benchmark in {args.varlog_bin}: unpack the real binaries "
                 "(../shared/varlog/README.md) and give --varlog-bin DIR")
    return args


def main():
    args = parse_args()
    outdir = args.out or tempfile.mkdtemp(prefix="scale.")
    os.makedirs(outdir, exist_ok=True)
    raw = open(os.path.join(outdir, "raw.txt"), "a")

    def interrupted(signum, frame):  # SIGTERM, SIGHUP: stop the cluster as Ctrl-C does
        raise KeyboardInterrupt()

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, interrupted)
    write_ks, read_ks = set(ints(args.write_ks)), set(ints(args.read_ks))
    handles_k = args.handles_k
    exact_k = args.exact_k if args.exact_bytes != "0" else None
    if args.cluster_env:
        ks = [None]
    else:
        ks = sorted(write_ks | read_ks | ({handles_k} if handles_k else set())
                    | ({exact_k} if exact_k else set()))
    writes, reads, handles, starts, exact = {}, {}, {}, [], []
    # Busy loops beside the run, as side-by-side.py's --hogs.
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.hogs)]
    load0 = os.getloadavg()
    try:
        for k in ks:
            cluster = None
            try:
                if k is None:
                    cluster = cluster_bench.Cluster(args, WHO, cluster_env=args.cluster_env)
                    k = len(cluster.log_streams)
                    # Each part unless its option is set empty (--read-ks "", --handles-k 0).
                    do = (({"write"} if write_ks else set()) | ({"read"} if read_ks else set())
                          | ({"handles"} if handles_k else set())
                          | ({"exact"} if exact_k else set()))
                else:
                    cluster = cluster_bench.Cluster(args, WHO, sns=SNS, rf=RF, log_streams=k)
                    starts.append((k, cluster.start_seconds))
                    do = (({"write"} if k in write_ks else set())
                          | ({"read"} if k in read_ks else set())
                          | ({"handles"} if k == handles_k else set())
                          | ({"exact"} if k == exact_k else set()))
                log(f"{WHO}: cluster at {','.join(cluster.mrs)}, topic {cluster.topic}, {k} log "
                    f"streams" + (f", started in {cluster.start_seconds:.0f} s"
                                  if cluster.start_seconds else "")
                    + f"; {', '.join(sorted(do))}; output in {outdir}")
                if "write" in do:
                    write_rounds(args, cluster, k, raw, writes)
                if "read" in do and preload(args, cluster, k, raw):
                    read_rounds(args, cluster, k, raw, reads)
                if "handles" in do:
                    handles_rounds(args, cluster, k, raw, handles)
                if "exact" in do:
                    exact.append(exactness(args, cluster, k, raw))
            finally:
                if cluster:
                    cluster.stop()
        load1 = os.getloadavg()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    parts = []
    if writes:
        parts.append(write_table(writes, args))
    if reads:
        parts.append(read_table(reads, args.shared_threads))
    if handles:
        parts.append(handles_table(handles, args))
    for e in exact:
        parts.append(f"Exactness, {e['bytes']} through k={e['k']} log streams: {e['verdict']} "
                     f"(whole check {e['seconds']:.0f} s; " + "; ".join(e["lines"]) + ")")
    quick = " (--quick: a smoke run, not a measurement)" if args.quick else ""
    note = (f"Medians of {args.rounds} round(s){quick}"
            f"; batch {args.batch}, depth {args.depth}"
            + "".join(f"; C writes with {kv}" for kv in args.c_conf)
            + f"; held floor {args.hold_mib} MiB; Go's --subscribe-size "
            f"{args.go_subscribe_size}"
            + (f"; clusters: {SNS} storage nodes, RF {RF}" if starts else "")
            + "".join(f"; k={k} started in {s:.0f} s" for k, s in starts)
            + f".\nLoad average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end "
            f"({os.cpu_count()} CPUs, {args.hogs} busy loops beside the run).")
    text = "\n\n".join(x for x in [per_round(writes, reads, handles)] + parts + [note] if x)
    raw.write("\n" + text + "\n")
    raw.close()
    print(text)


if __name__ == "__main__":
    main()
