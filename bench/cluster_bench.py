"""What bench/side-by-side.py and bench/scale.py share: the cluster they run against, one
run of Varlog's Go `benchmark` or of a C bench program with what the client process alone
cost, and the table cells.

Measured per client process (never the cluster's, which runs in other processes):
  CPU          user + system of every thread: over a steady window from /proc/PID/stat
               (Go, at its JSON reports), or the C program's own getrusage figure per round;
  ctxsw        voluntary + involuntary context switches of every thread
               (/proc/PID/task/*/status, summed, at the same samples);
  threads      the most entries /proc/PID/task had at any sample (every 0.2 s while it ran,
               and at Go's reports): the OS threads of the process;
  max RSS      ru_maxrss of that process alone (os.wait4 reaps it with its own rusage)."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import medians  # noqa: E402  (bench/medians.py: the Go benchmark line parser)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_EVERY = 0.2
RANGE_RE = re.compile(r'msg="subscribe range".*?first="\{LLSN:(\d+) GLSN:\d+\}" '
                      r'last="\{LLSN:(\d+) GLSN:\d+\}"')


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


def default_varlog_bin():
    """build-varlog-bin or build/varlog-bin (where varlog-cluster.sh unpacks them) if it
    exists, else what `scripts/varlog-cluster.sh bin` unpacks."""
    for d in (os.path.join(ROOT, "build-varlog-bin"), os.path.join(ROOT, "build", "varlog-bin")):
        if os.access(os.path.join(d, "benchmark"), os.X_OK):
            return d
    return subprocess.run([os.path.join(ROOT, "scripts", "varlog-cluster.sh"), "bin"],
                          stdout=subprocess.PIPE, text=True).stdout.strip()


class Cluster:
    """A cluster started by scripts/varlog-cluster.sh (stopped by stop()), or a running
    one given by cluster_env (left alone). who: the caller's name for messages."""

    def __init__(self, args, who, sns=1, rf=1, log_streams=1, cluster_env=None):
        self.dir = None
        self.start_seconds = None
        if cluster_env:
            env = read_env(cluster_env)
        else:
            script = os.path.join(ROOT, "scripts", "varlog-cluster.sh")
            if not os.access(script, os.X_OK):
                sys.exit(f"{who}: {script} is missing; give --cluster-env FILE of a "
                         "running cluster instead")
            self.dir = tempfile.mkdtemp(prefix=f"{who}-cluster.")
            cmd = [script, "start", "--dir", self.dir, "--sns", str(sns), "--rf", str(rf),
                   "--mrs", "1", "--topics", "1", "--log-streams", str(log_streams),
                   "--owner-pid", str(os.getpid())]
            cmd += [f"--sn-arg={a}" for a in args.sn_arg]
            log(f"{who}: " + " ".join(cmd))
            t0 = time.monotonic()
            # Its stdout (cluster.env) goes to stderr: stdout is the table's.
            if subprocess.run(cmd, env=dict(os.environ, VARLOG_BIN=args.varlog_bin),
                              stdout=sys.stderr).returncode:
                logs = self.dir
                self.stop()
                sys.exit(f"{who}: the cluster did not start (its logs: {logs})")
            self.start_seconds = time.monotonic() - t0
            env = read_env(os.path.join(self.dir, "cluster.env"))
        self.mrs = split_list(env["VARLOG_MR_ADDRS"])
        self.topic = int(split_list(env.get("VARLOG_TOPIC_ID", "1"))[0])
        self.log_streams = [int(x) for x in split_list(env.get("VARLOG_LOG_STREAMS", "1"))]
        self.log_stream = self.log_streams[0]

    def stop(self):
        if self.dir:
            script = os.path.join(ROOT, "scripts", "varlog-cluster.sh")
            subprocess.run([script, "stop", "--dir", self.dir], stdout=sys.stderr)
            self.dir = None


# ---- one process, measured ---------------------------------------------------------------


def proc_sample(pid):
    """(CPU seconds, context switches, threads) of every thread of process pid, or None once
    gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14, 15
        csw = 0
        tids = os.listdir(f"/proc/{pid}/task")
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                            csw += int(line.split()[1])
            except FileNotFoundError:
                pass  # a thread that ended: its switches are lost (Go's rarely end)
        return cpu, csw, len(tids)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def thread_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return 0


class Run:
    """The outcome of run_process: rc, the output lines, the most threads seen, the
    process's own rusage (ru_maxrss in KiB)."""

    def __init__(self, rc, lines, threads, ru):
        self.rc, self.lines, self.threads, self.ru = rc, lines, threads, ru

    @property
    def rss_mb(self):
        return self.ru.ru_maxrss / 1024 if self.ru else None


def run_process(cmd, out, timeout=None, on_line=None):
    """Runs cmd, its stdout and stderr written to out line by line (and to on_line(line,
    pid)); counts its threads every SAMPLE_EVERY seconds; reaps it with os.wait4 for its
    own rusage. Killed after timeout seconds, or when this process is interrupted."""
    out.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    most = [0]
    stop = threading.Event()

    def sampler():
        while True:
            most[0] = max(most[0], thread_count(p.pid))
            if stop.wait(SAMPLE_EVERY):
                return

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    killer = threading.Timer(timeout, p.kill) if timeout else None
    if killer:
        killer.start()
    lines = []
    ru = None
    rc = -1
    try:
        for line in p.stdout:
            out.write(line)
            lines.append(line)
            if on_line:
                on_line(line, p.pid)
    finally:
        if killer:
            killer.cancel()
        if sys.exc_info()[0] is not None:
            p.kill()  # interrupted: it must not outlive the cluster
        stop.set()
        th.join()
        _, status, ru = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        p.returncode = rc  # reaped here: Popen must not wait for it again
        p.stdout.close()
    out.write(f"# exit {rc}\n")
    return Run(rc, lines, most[0], ru)


def run_go(args, cluster, extra, key, out, size=None, who="side-by-side", allow_eof=False):
    """Varlog's benchmark with extra arguments; returns the window's rate, CPU per unit and
    switches per request (append) or per 1000 entries (subscribe), summed over its targets,
    with its threads and max RSS; None when it failed. key: "append" or "subscribe". size:
    the record size (append; default args.size). allow_eof: a SubscribeTo target that
    reached the end of its log stream ends the run with an error ("EOF"); its reports until
    then count."""
    size = size or getattr(args, "size", None)
    cmd = [os.path.join(args.varlog_bin, "benchmark"), "test", "--cluster-id", "1"]
    for a in cluster.mrs:
        cmd += ["--address", a]
    interval = getattr(args, "report_interval", "1s")
    cmd += ["--gops-addr", "127.0.0.1:0", "--report-interval", interval, "--print-json"] + extra
    samples = []  # (time, reports, cpu, csw) at each JSON line

    def on_line(line, pid):
        if not line.startswith("{"):
            return
        t = time.monotonic()
        s = proc_sample(pid)
        if s:
            samples.append((t, json.loads(line)["reports"], s[0], s[1]))

    r = run_process(cmd, out, on_line=on_line)
    ended_eof = r.rc != 0 and any("EOF" in ln for ln in r.lines[-20:])
    if (r.rc != 0 and not (allow_eof and ended_eof)) or len(samples) < 3:
        log(f"{who}: benchmark failed (exit {r.rc}, {len(samples)} reports)")
        return None
    # The window: from the first report to the second-to-last (the last one may be a
    # partial second, sampled while the process ends).
    win = samples[:-1]
    units = requests = 0.0
    for (t0, _, _, _), (t1, reps, _, _) in zip(win, win[1:]):
        for rep in reps:
            if key == "append":
                units += rep["recent"]["append"]["bytesPerSecond"] / size * (t1 - t0)
                requests += rep["recent"]["append"]["requestsPerSecond"] * (t1 - t0)
            else:
                units += rep["recent"]["subscribe"]["logsPerSecond"] * (t1 - t0)
    secs = win[-1][0] - win[0][0]
    cpu = win[-1][2] - win[0][2]
    csw = win[-1][3] - win[0][3]
    if units <= 0:
        return None
    res = {"rate": units / secs, "cpu_us": cpu * 1e6 / units, "threads": r.threads,
           "rss_mb": r.rss_mb, "targets": len(samples[-1][1])}
    if key == "append":
        res["csw"] = csw / requests if requests else float("nan")
    else:
        res["csw"] = csw * 1000 / units
        # What each target held: its "subscribe range" lines (first and last LLSN).
        res["ranges"] = [(int(a), int(b)) for a, b in RANGE_RE.findall("".join(r.lines))]
        # Everything it read, for the C reader's range: its total rate over the run, which
        # began one report interval before the first report.
        last_t, last_reps = samples[-1][0], samples[-1][1]
        first_interval = samples[1][0] - samples[0][0]
        res["total"] = sum(rep["total"]["subscribe"]["logsPerSecond"] for rep in last_reps) * (
            last_t - samples[0][0] + first_interval)
    return res


def run_c(args, prog, flags, row, out, who="side-by-side"):
    """One row of a C bench program (Go benchmark lines); its metrics, with the process's
    threads ("proc-threads") and max RSS ("proc-maxrss-MB"), or None when it failed."""
    cmd = [os.path.join(args.bench_dir, prog)] + flags + ([row] if row else [])
    r = run_process(cmd, out, timeout=args.c_timeout)
    _, rows = medians.parse(r.lines)
    if r.rc != 0 or not rows:
        log(f"{who}: {prog} {row or ''} failed (exit {r.rc})")
        return None
    m = dict(next(iter(rows.values()))[0])
    m["proc-threads"] = r.threads
    m["proc-maxrss-MB"] = r.rss_mb
    return m


# ---- table cells ----------------------------------------------------------------------------


def med(results, who, key):
    vals = [r[who][key] for r in results if r.get(who) and r[who].get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits=2):
    if v is None or v != v:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}" if v < 100 else f"{v:.0f}"


def ratio(a, b):
    return a / b if a is not None and b else None
