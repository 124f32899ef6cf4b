#!/usr/bin/env python3
"""libvarlog and Varlog's Go client side by side, on the same real Varlog cluster.

    flock /tmp/varlog-real-cluster.lock bench/side-by-side.py [--bench-dir build/bench]
        [--varlog-bin build-varlog-bin] [--rounds 3] [--out DIR] [--cluster-env FILE]
        [--sn-arg=ARG]... (--help: every option)

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
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import medians  # noqa: E402  (bench/medians.py: the Go benchmark line parser)

CONFIGS = [(1, 1), (100, 1), (100, 8), (1000, 8)]
# The trickle's requests: its default linger (5 ms) and depth (2) at 2,000 records/s.
TRICKLE_BATCH = 10
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the cluster ------------------------------------------------------------------------


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            k, v = line.split("=", 1)
            env[k.removeprefix("export ").strip()] = v.strip().strip("'\"")
    return env


def split_list(v):
    return [x for x in v.replace(",", " ").split() if x]


class Cluster:
    """A cluster started by scripts/varlog-cluster.sh (stopped by stop()), or a running
    one given by --cluster-env (left alone)."""

    def __init__(self, args):
        self.dir = None
        if args.cluster_env:
            env = read_env(args.cluster_env)
        else:
            script = os.path.join(ROOT, "scripts", "varlog-cluster.sh")
            if not os.access(script, os.X_OK):
                sys.exit(f"side-by-side: {script} is missing; give --cluster-env FILE of a "
                         "running cluster instead")
            self.dir = tempfile.mkdtemp(prefix="side-by-side-cluster.")
            cmd = [script, "start", "--dir", self.dir, "--sns", "1", "--rf", "1", "--mrs", "1",
                   "--topics", "1", "--log-streams", "1", "--owner-pid", str(os.getpid())]
            cmd += [f"--sn-arg={a}" for a in args.sn_arg]
            log("side-by-side: " + " ".join(cmd))
            # Its stdout (cluster.env) goes to stderr: stdout is the table's.
            if subprocess.run(cmd, env=dict(os.environ, VARLOG_BIN=args.varlog_bin),
                              stdout=sys.stderr).returncode:
                logs = self.dir
                self.stop()
                sys.exit(f"side-by-side: the cluster did not start (its logs: {logs})")
            env = read_env(os.path.join(self.dir, "cluster.env"))
        self.mrs = split_list(env["VARLOG_MR_ADDRS"])
        self.topic = int(split_list(env.get("VARLOG_TOPIC_ID", "1"))[0])
        self.log_stream = int(split_list(env.get("VARLOG_LOG_STREAMS", "1"))[0])

    def stop(self):
        if self.dir:
            script = os.path.join(ROOT, "scripts", "varlog-cluster.sh")
            subprocess.run([script, "stop", "--dir", self.dir], stdout=sys.stderr)
            self.dir = None


# ---- one run of each client -------------------------------------------------------------


def proc_sample(pid):
    """(CPU seconds, context switches) of every thread of process pid, or None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14, 15
        csw = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                            csw += int(line.split()[1])
            except FileNotFoundError:
                pass  # a thread that ended: its switches are lost (Go's rarely end)
        return cpu, csw
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def run_go(args, cluster, extra, key, out):
    """Varlog's benchmark with extra arguments; returns the window's rate, CPU per unit and
    switches per request, or None when it failed. key: "append" or "subscribe"."""
    cmd = [os.path.join(args.varlog_bin, "benchmark"), "test", "--cluster-id", "1"]
    for a in cluster.mrs:
        cmd += ["--address", a]
    cmd += ["--gops-addr", "127.0.0.1:0", "--report-interval", "1s", "--print-json"] + extra
    out.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples = []  # (time, report, cpu, csw) at each JSON line
    try:
        for line in p.stdout:
            out.write(line)
            if not line.startswith("{"):
                continue
            t = time.monotonic()
            s = proc_sample(p.pid)
            if s:
                samples.append((t, json.loads(line)["reports"][0], s[0], s[1]))
        rc = p.wait()
    finally:
        if p.poll() is None:  # interrupted: it must not outlive the cluster
            p.kill()
            p.wait()
    out.write(f"# exit {rc}\n")
    if rc != 0 or len(samples) < 3:
        log(f"side-by-side: benchmark failed (exit {rc}, {len(samples)} reports)")
        return None
    # The window: from the first report to the second-to-last (the last one may be a
    # partial second, sampled while the process ends).
    win = samples[:-1]
    units = requests = 0.0
    for (t0, _, _, _), (t1, rep, _, _) in zip(win, win[1:]):
        if key == "append":
            units += rep["recent"]["append"]["bytesPerSecond"] / args.size * (t1 - t0)
            requests += rep["recent"]["append"]["requestsPerSecond"] * (t1 - t0)
        else:
            units += rep["recent"]["subscribe"]["logsPerSecond"] * (t1 - t0)
    secs = win[-1][0] - win[0][0]
    cpu = win[-1][2] - win[0][2]
    csw = win[-1][3] - win[0][3]
    if units <= 0:
        return None
    r = {"rate": units / secs, "cpu_us": cpu * 1e6 / units}
    if key == "append":
        r["csw"] = csw / requests if requests else float("nan")
    else:
        r["csw"] = csw * 1000 / units
        # Everything it read, for the C reader's range: its total rate over the run, which
        # began one report interval before the first report.
        last_t, last_rep = samples[-1][0], samples[-1][1]
        r["total"] = last_rep["total"]["subscribe"]["logsPerSecond"] * (last_t - samples[0][0] + 1)
    return r


def run_c(args, prog, flags, row, out):
    """One bench_append or bench_subscribe row; its metrics, or None when it failed."""
    cmd = [os.path.join(args.bench_dir, prog)] + flags + [row]
    out.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=args.c_timeout)
    out.write(p.stdout + f"# exit {p.returncode}\n")
    _, rows = medians.parse(p.stdout.splitlines())
    if p.returncode != 0 or not rows:
        log(f"side-by-side: {prog} {row} failed (exit {p.returncode})")
        return None
    return next(iter(rows.values()))[0]


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


def med(results, who, key):
    vals = [r[who][key] for r in results if r.get(who) and key in r[who]]
    return statistics.median(vals) if vals else None


def fmt(v, digits=2):
    if v is None or v != v:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}" if v < 100 else f"{v:.0f}"


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


def ratio(a, b):
    return a / b if a is not None and b else None


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
        args.varlog_bin = os.path.join(ROOT, "build-varlog-bin")
        if not os.path.isdir(args.varlog_bin):
            args.varlog_bin = subprocess.run(
                [os.path.join(ROOT, "scripts", "varlog-cluster.sh"), "bin"],
                stdout=subprocess.PIPE, text=True).stdout.strip()
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
        cluster = Cluster(args)
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
