#!/usr/bin/env python3
"""libvarlog and Varlog's Go client side by side, on the same real Varlog cluster.

    flock /tmp/varlog-real-cluster.lock bench/side-by-side.py [--bench-dir build/bench]
        [--varlog-bin build-varlog-bin] [--rounds 3] [--out DIR] [--cluster-env FILE]
        [--sn-arg=ARG]... (--help: every option)
    bench/side-by-side.py --scale ...: runs bench/scale.py (issue 37's rows) with the rest

Starts a cluster of 1 metadata repository, 1 storage node, 1 topic and 1 log stream with
scripts/varlog-cluster.sh (or, with --cluster-env, uses a running one described by that
file's VARLOG_MR_ADDRS, VARLOG_TOPIC_ID and VARLOG_LOG_STREAMS lines), then, --rounds times,
for each (batch, pipeline) of (1,1), (100,1), (100,8), (1000,8), with 128-byte records on
the one log stream:

  C:  bench_append -mr ADDR -size 128 Appender/size=128/batch=B/depth=P/producers=1
      (one producer thread appending one record per call to an appender with
      appender.batch.max.records = B and appender.pipeline.depth = P);
  Go: benchmark test --appenders 1 --msg-size 128 --batch-size B --pipeline-size P
      (one goroutine calling LogStreamAppender.AppendBatch with B records per call, the
      appender created WithPipelineSize(P)).

  floor: bench_server_append -mr ADDR -size 128 AppendFloor/size=128/batch=B/depth=P (the
      same requests on a bare gRPC-core call, one thread, the request encoded once, no
      library: what gRPC core and the kernel cost any client built on them, issue 25).

All three send AppendRequests of B records with at most P in flight on one stream; the C
appender forms the batches from single-record calls (bench_append reports records/batch to
show they were full), the Go benchmark and the floor hand over whole batches. They run one
after the other, in an order reversed from round to round, so drift of the machine's load
hits all of them.

Then, --rounds times, a topic-wide read from the topic's first entry: Go's `benchmark
--subscribers 1` (Subscribe of --subscribe-size 1000 GLSNs at a time, the benchmark's
default) for --read-seconds, then bench_subscribe's Subscribe/iter row reading exactly as
many entries from the same first GLSN in one measured round (-benchtime=Nx), then its
GrpcFloor row: the same entries on one bare Subscribe call polled by the benchmark's thread
(the floor under any client on gRPC core).

What is measured, for both clients, over a steady window:
  records/s   C: the measured round of bench_append (b.N records, flush included);
              Go: the records its per-second reports count between its first and its
              second-to-last report (start-up and the last partial second left out);
  CPU us per record: user + system CPU time of the client process alone (the cluster runs
              in other processes). C: getrusage(RUSAGE_SELF) over the round; Go:
              /proc/PID/stat utime + stime over the same window as its records;
  context switches per request: voluntary + involuntary, every thread of the client
              process (C: getrusage; Go: the sum over /proc/PID/task/*/status), divided by
              the AppendRequests sent in the window (C: the appender's batches_sent; Go:
              its requests, one per AppendBatch). For reads: per 1000 entries.
The table shows the median of the rounds; --out keeps every run's output (and the
cluster's logs stay in the cluster directory until it is stopped).

Then, --rounds times, a trickle (C only: Go's benchmark cannot pace its appends):
  varlog-cli --mr ADDR bench --rate R --size 128 --duration S --json (--trickle-rate,
  default 2000 records/s, 0 = skip; --trickle-seconds, default 5): one producer thread
  appending one record per call at R records/s (paced in 1 ms steps) through a topic-wide
  appender with the default batch, linger and depth; its cpu_us_per_record (the process's
  user + system CPU over the records appended, start-up and metadata lookups included) and
  context switches per record (the whole process, from its rusage). Beside it, its floor:
  bench_server_append -rate R/10 AppendFloor/size=128/batch=10/depth=2/rate=R/10, requests
  of 10 records (what 5 ms of linger gathers at 2,000 records/s) at the same record rate on
  a bare call, the thread waiting in its queue between them.

--hogs N runs N busy loops (one process each, at the lowest priority a user may not lower
further: none, they compete as other work would) for the whole run: the table beside a CPU
load, as issue 25 asks (scripts/stress-suite.sh -H uses the same loop).

Needs the real Varlog binaries (benchmark, varlogmr, varlogsn, varlogadm, varlogctl): see
../shared/varlog/README.md (`unpack DEST`). Only one real cluster should run on a small
machine at a time: wrap the run in flock as above."""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_bench  # noqa: E402  (bench/cluster_bench.py: what bench/scale.py shares)
from cluster_bench import ROOT, fmt, log, med, ratio, run_c, run_go  # noqa: E402

CONFIGS = [(1, 1), (100, 1), (100, 8), (1000, 8)]
# The trickle's requests: its default linger (5 ms) and depth (2) at 2,000 records/s.
TRICKLE_BATCH = 10
def open_cluster(args):
    """The cluster of 1 MR, 1 SN, 1 log stream (or --cluster-env's)."""
    return cluster_bench.Cluster(args, "side-by-side", cluster_env=args.cluster_env)


# ---- one run of each client -------------------------------------------------------------


def append_flags(args, cluster, benchtime):
    """bench_append's and bench_server_append's flags for the cluster's log stream."""
    return c_flags(args, cluster) + ["-logstream", str(cluster.log_stream), "-size",
                                     str(args.size), f"-benchtime={benchtime}"]


def floor_round(args, cluster, b, d, out):
    m = run_c(args, "bench_server_append", append_flags(args, cluster, args.benchtime),
              f"AppendFloor/size={args.size}/batch={b}/depth={d}", out)
    if not m:
        return None
    return {"rate": m["records/s"], "cpu_us": m["cpu-us/record"],
            "csw": m.get("ctxsw/request", float("nan"))}


def c_flags(args, cluster):
    return ["-mr", ",".join(cluster.mrs), "-topic", str(cluster.topic)]


def append_round(args, cluster, rnd, b, d, out):
    res = {}
    row = f"Appender/size={args.size}/batch={b}/depth={d}/producers=1"
    cflags = append_flags(args, cluster, args.benchtime)
    goargs = ["--target", f"{cluster.topic}:{cluster.log_stream}", "--appenders", "1",
              "--msg-size", str(args.size), "--batch-size", str(b), "--pipeline-size", str(d),
              "--subscribers", "0", "--duration", f"{args.go_seconds}s"]
    order = ["c", "go", "floor"] if rnd % 2 == 0 else ["floor", "go", "c"]
    for who in order:
        if who == "floor":
            res["floor"] = floor_round(args, cluster, b, d, out)
        elif who == "c":
            m = run_c(args, "bench_append", cflags, row, out)
            if m:
                res["c"] = {"rate": m["records/s"], "cpu_us": m["cpu-us/record"],
                            "csw": m.get("ctxsw/request", float("nan")),
                            "batch": m.get("records/batch", float("nan"))}
        else:
            res["go"] = run_go(args, cluster, goargs, "append", out)
    return res


def read_round(args, cluster, out):
    res = {}
    goargs = ["--target", f"{cluster.topic}:0", "--appenders", "0", "--subscribers", "1",
              "--msg-size", str(args.size), "--duration", f"{args.read_seconds}s"]
    res["go"] = run_go(args, cluster, goargs, "subscribe", out)
    n = int(res["go"]["total"]) if res["go"] else args.read_entries
    m = run_c(args, "bench_subscribe", c_flags(args, cluster) + ["-nofill", f"-benchtime={n}x"],
              "Subscribe/iter/", out)
    if m:
        res["c"] = {"rate": m["entries/s"], "cpu_us": m["cpu-us/entry"],
                    "csw": m.get("ctxsw/1000entries", float("nan")), "n": n}
    # The floor: the same entries on one bare Subscribe call (bench_subscribe offers it when
    # the topic has one log stream, as the cluster this script starts has).
    m = run_c(args, "bench_subscribe", c_flags(args, cluster) + ["-nofill", f"-benchtime={n}x"],
              "GrpcFloor/", out)
    if m:
        res["floor"] = {"rate": m["entries/s"], "cpu_us": m["cpu-us/entry"],
                        "csw": m.get("ctxsw/1000entries", float("nan")), "n": n}
    return res


def trickle_round(args, cluster, out):
    """One paced run of varlog-cli bench; its rate, CPU and context switches per record."""
    cmd = [args.cli, "--mr", ",".join(cluster.mrs), "-q", "bench", "--mode", "append",
           "--rate", str(args.trickle_rate), "--size", str(args.size), "--duration",
           str(args.trickle_seconds), "--topic", str(cluster.topic), "--json"]
    out.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        text, _ = p.communicate(timeout=args.c_timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        text, _ = p.communicate()
    out.write(text + f"# exit {p.returncode}\n")
    if p.returncode != 0:
        log(f"side-by-side: varlog-cli bench --rate failed (exit {p.returncode})")
        return None
    try:
        a = json.loads(text[text.index("{"):])["append"]
    except (ValueError, KeyError):
        log("side-by-side: varlog-cli bench printed no JSON summary")
        return None
    return {"rate": a["records_per_s"], "cpu_us": a["cpu_us_per_record"], "n": a["appended"]}


def trickle_with_csw(args, cluster, out):
    # The child's context switches: RUSAGE_CHILDREN around it, the only child running then.
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = trickle_round(args, cluster, out)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r and r["n"]:
        csw = (r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw)
        r["csw"] = csw / r["n"]
    # Its floor: requests of TRICKLE_BATCH records at the same record rate on a bare call.
    rate = max(1, round(args.trickle_rate / TRICKLE_BATCH))
    m = run_c(args, "bench_server_append",
              append_flags(args, cluster, f"{args.trickle_seconds}s") + ["-rate", str(rate)],
              f"AppendFloor/size={args.size}/batch={TRICKLE_BATCH}/depth=2/rate={rate}", out)
    if r is not None and m:
        r["floor_cpu_us"] = m["cpu-us/record"]
        r["floor_csw"] = m["ctxsw/request"] / TRICKLE_BATCH
    return r


# ---- the table ---------------------------------------------------------------------------


def trickle_table(trickles, args):
    rs = [t for t in trickles if t]
    if not args.trickle_rate:
        return ""

    def m(k):
        vals = [t[k] for t in rs if k in t]
        return statistics.median(vals) if vals else None
    return ("\n\n| trickle (C only) | records/s | client CPU µs/record | floor | C / floor "
            "| ctxsw/record | floor |\n"
            "|---|---|---|---|---|---|---|\n"
            f"| {args.trickle_rate}/s of {args.size} B, 1 producer, default linger "
            f"| {fmt(m('rate'))} | {fmt(m('cpu_us'))} | {fmt(m('floor_cpu_us'))} "
            f"| {fmt(ratio(m('cpu_us'), m('floor_cpu_us')))} | {fmt(m('csw'), 2)} "
            f"| {fmt(m('floor_csw'), 2)} |")


def table(appends, reads, rounds):
    lines = ["| (batch, pipeline) | records/s C | Go | floor | client CPU µs/record C | Go "
             "| floor | C / Go | C / floor | ctxsw/request C | Go | floor | C / Go "
             "| C records/request |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (b, d) in CONFIGS:
        rs = appends[(b, d)]
        cpu = {w: med(rs, w, "cpu_us") for w in ("c", "go", "floor")}
        csw = {w: med(rs, w, "csw") for w in ("c", "go", "floor")}
        lines.append(f"| ({b},{d}) | {fmt(med(rs, 'c', 'rate'))} | {fmt(med(rs, 'go', 'rate'))} "
                     f"| {fmt(med(rs, 'floor', 'rate'))} "
                     f"| {fmt(cpu['c'])} | {fmt(cpu['go'])} | {fmt(cpu['floor'])} "
                     f"| {fmt(ratio(cpu['c'], cpu['go']))} | {fmt(ratio(cpu['c'], cpu['floor']))} "
                     f"| {fmt(csw['c'], 1)} | {fmt(csw['go'], 1)} | {fmt(csw['floor'], 1)} "
                     f"| {fmt(ratio(csw['c'], csw['go']))} "
                     f"| {fmt(med(rs, 'c', 'batch'), 1)} |")
    rcpu = {w: med(reads, w, "cpu_us") for w in ("c", "go", "floor")}
    lines += ["",
              "| topic-wide read | entries/s C | Go | floor | client CPU µs/entry C | Go "
              "| floor | C / Go | C / floor | ctxsw/1000 entries C | Go | floor |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|",
              f"| {fmt(med(reads, 'c', 'n'))} entries | {fmt(med(reads, 'c', 'rate'))} "
              f"| {fmt(med(reads, 'go', 'rate'))} | {fmt(med(reads, 'floor', 'rate'))} "
              f"| {fmt(rcpu['c'])} | {fmt(rcpu['go'])} | {fmt(rcpu['floor'])} "
              f"| {fmt(ratio(rcpu['c'], rcpu['go']))} | {fmt(ratio(rcpu['c'], rcpu['floor']))} "
              f"| {fmt(med(reads, 'c', 'csw'), 1)} | {fmt(med(reads, 'go', 'csw'), 1)} "
              f"| {fmt(med(reads, 'floor', 'csw'), 1)} |",
              f"\nMedians of {rounds} rounds (every round: above, and the raw file)."]
    return "\n".join(lines)


def per_round(appends, reads):
    lines = []
    for (b, d) in CONFIGS:
        for i, r in enumerate(appends[(b, d)]):
            cells = [f"({b},{d}) round {i + 1}"]
            for who in ("c", "go", "floor"):
                x = r.get(who)
                cells.append(f"{who}: " + ("failed" if not x else
                             f"{fmt(x['rate'])}/s {fmt(x['cpu_us'])} µs {fmt(x['csw'], 1)} csw"))
            lines.append("  ".join(cells))
    for i, r in enumerate(reads):
        cells = [f"read round {i + 1}"]
        for who in ("c", "go", "floor"):
            x = r.get(who)
            cells.append(f"{who}: " + ("failed" if not x else
                         f"{fmt(x['rate'])}/s {fmt(x['cpu_us'])} µs {fmt(x['csw'], 1)} csw/1000"))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main():
    if "--scale" in sys.argv[1:]:
        # The rows of issue 37 (many log streams, producers, readers, handles): bench/scale.py,
        # which takes the rest of the arguments.
        scale = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale.py")
        rest = [a for a in sys.argv[1:] if a != "--scale"]
        os.execv(sys.executable, [sys.executable, scale] + rest)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-dir", default=os.path.join(ROOT, "build", "bench"),
                    help="where bench_append and bench_subscribe are (default build/bench)")
    ap.add_argument("--varlog-bin", default=os.environ.get("VARLOG_BIN"),
                    help="the unpacked Varlog binaries (default $VARLOG_BIN, build-varlog-bin "
                    "if it exists, else what `scripts/varlog-cluster.sh bin` unpacks)")
    ap.add_argument("--cluster-env", help="use the running cluster this file describes")
    ap.add_argument("--sn-arg", action="append", default=[],
                    help="an extra varlogsn argument (repeatable), e.g. "
                    "--sn-arg=--grpc-server-initial-window-size=1048576")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=128, help="record bytes (default 128)")
    ap.add_argument("--benchtime", default="2s", help="bench_append's -benchtime (2s)")
    ap.add_argument("--go-seconds", type=int, default=8, help="benchmark --duration (8)")
    ap.add_argument("--read-seconds", type=int, default=10,
                    help="the Go reader's --duration; the C reader reads as many entries (10)")
    ap.add_argument("--read-entries", type=int, default=500000,
                    help="entries the C reader reads when the Go reader failed (500000)")
    ap.add_argument("--trickle-rate", type=int, default=2000,
                    help="records/s of the trickle row (varlog-cli bench --rate; 0 = skip)")
    ap.add_argument("--trickle-seconds", type=int, default=5,
                    help="the trickle's --duration (5)")
    ap.add_argument("--cli", help="varlog-cli for the trickle (default BENCH_DIR/../cli/"
                    "varlog-cli)")
    ap.add_argument("--hogs", type=int, default=0,
                    help="busy loops beside the run, one process each (default 0)")
    ap.add_argument("--c-timeout", type=int, default=600, help="seconds per C run (600)")
    ap.add_argument("--out", help="directory for every run's output (default: a new one in /tmp)")
    args = ap.parse_args()
    if not args.varlog_bin:
        args.varlog_bin = cluster_bench.default_varlog_bin()
    for prog in ("bench_append", "bench_subscribe", "bench_server_append"):
        if not os.access(os.path.join(args.bench_dir, prog), os.X_OK):
            sys.exit(f"side-by-side: no {prog} in {args.bench_dir} (cmake --build ... --target "
                     "bench_append bench_subscribe bench_server_append; --bench-dir DIR)")
    if not os.access(os.path.join(args.varlog_bin, "benchmark"), os.X_OK):
        sys.exit(f"side-by-side: no Varlog benchmark in {args.varlog_bin}: unpack the real "
                 "binaries (../shared/varlog/README.md) and give --varlog-bin DIR")
    if not args.cli:
        args.cli = os.path.join(args.bench_dir, os.pardir, "cli", "varlog-cli")
    if args.trickle_rate and not os.access(args.cli, os.X_OK):
        sys.exit(f"side-by-side: no varlog-cli at {args.cli} (--cli PATH, or --trickle-rate 0)")
    outdir = args.out or tempfile.mkdtemp(prefix="side-by-side.")
    os.makedirs(outdir, exist_ok=True)
    raw = open(os.path.join(outdir, "raw.txt"), "a")

    # SIGTERM and SIGHUP end the run as Ctrl-C does, so the cluster is stopped.
    def interrupted(signum, frame):
        raise KeyboardInterrupt()

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, interrupted)
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.hogs)]
    cluster = None
    try:
        cluster = open_cluster(args)
        load0 = os.getloadavg()
        log(f"side-by-side: cluster at {','.join(cluster.mrs)}, topic {cluster.topic}, log "
            f"stream {cluster.log_stream}; output in {outdir}; load {load0[0]:.2f}")
        appends = {c: [] for c in CONFIGS}
        for rnd in range(args.rounds):
            for (b, d) in CONFIGS:
                log(f"side-by-side: round {rnd + 1}/{args.rounds}: append ({b},{d})")
                appends[(b, d)].append(append_round(args, cluster, rnd, b, d, raw))
                raw.flush()
        reads = []
        for rnd in range(args.rounds):
            log(f"side-by-side: round {rnd + 1}/{args.rounds}: read")
            reads.append(read_round(args, cluster, raw))
            raw.flush()
        trickles = []
        for rnd in range(args.rounds if args.trickle_rate else 0):
            log(f"side-by-side: round {rnd + 1}/{args.rounds}: trickle")
            trickles.append(trickle_with_csw(args, cluster, raw))
            raw.flush()
        load1 = os.getloadavg()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if cluster:
            cluster.stop()
    rounds = per_round(appends, reads)
    for i, x in enumerate(trickles):
        rounds += f"\ntrickle round {i + 1}  c: " + ("failed" if not x else
                   f"{fmt(x['rate'])}/s {fmt(x['cpu_us'])} µs {fmt(x.get('csw'), 2)} csw/record"
                   f"  floor: {fmt(x.get('floor_cpu_us'))} µs {fmt(x.get('floor_csw'), 2)} "
                   "csw/record")
    t = table(appends, reads, args.rounds) + trickle_table(trickles, args)
    note = (f"\nLoad average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end "
            f"({os.cpu_count()} CPUs, {args.hogs} busy loops beside the run).")
    raw.write("\n" + rounds + "\n\n" + t + note + "\n")
    raw.close()
    print(rounds + "\n\n" + t + note)


if __name__ == "__main__":
    main()
