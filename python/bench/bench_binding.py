#!/usr/bin/env python3
"""Benchmarks of the Python binding in Go's line format, beside bench/bench_append and
bench/bench_subscribe (docs/BENCHMARKS.md):

  PyAppender/size=100/future=1   Appender.append(record) per record, keeping no future
                                 (each is created, resolved and dropped), one producer
                                 thread; the clock stops when flush() returned: every
                                 future resolved
  PyAppender/size=100/future=0   Appender.append(record, future=False)
  PySubscribe/iter/ls=1/size=100 iterating client.subscribe over what was appended

Against a varlog-server child process (--server PATH, default build/server/varlog-server;
1 topic of 1 log stream, --max-bytes 8g), so that the CPU time (getrusage RUSAGE_SELF: the
interpreter and every thread of the library) is the client's alone. Default properties, as
the C rows Appender/size=100/batch=1000/depth=2/producers=1 and Subscribe/iter/ls=1.

  PYTHONPATH=python /usr/bin/python3 python/bench/bench_binding.py [-n RECORDS] [-count N]
      [--server PATH] [FILTER]
"""

import argparse
import ctypes
import os
import resource
import signal
import subprocess
import sys
import time

import varlog

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def line(name, n, secs, cpus, unit):
    print(f"Benchmark{name}-{os.cpu_count()}\t{n:8d}\t{secs / n * 1e9:10.1f} ns/op\t"
          f"{n * 100 / secs / 1e6:8.2f} MB/s\t{n / secs:10.0f} {unit.replace('y', 'ie')}s/s\t"
          f"{cpus / n * 1e6:8.3f} cpu-us/{unit}", flush=True)


def die_with_parent():
    # PR_SET_PDEATHSIG: the server ends with this process, also when it is killed
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def start_server(path):
    p = subprocess.Popen([path, "--listen", "127.0.0.1:0", "--topics", "1", "--log-streams",
                          "1", "--max-bytes", "8g"], stdout=subprocess.PIPE, text=True,
                         preexec_fn=die_with_parent)
    addr = p.stdout.readline().strip()
    if not addr:
        p.kill()
        sys.exit(f"bench_binding: {path} did not print its address")
    return p, addr


def bench_appender(addr, n, future):
    rec = b"x" * 100
    with varlog.Client(addr) as c, c.appender(1, log_stream=1) as app:
        for _ in range(20000):  # warm-up: streams open, queue grown
            app.append(rec, future=future)
        app.flush()
        c0, t0 = cpu(), time.perf_counter()
        append = app.append
        if future:
            for _ in range(n):
                append(rec)
        else:
            for _ in range(n):
                append(rec, future=False)
        app.flush()
        secs, cpus = time.perf_counter() - t0, cpu() - c0
        assert app.stats()["calls_failed"] == 0
    line(f"PyAppender/size=100/future={int(future)}", n, secs, cpus, "record")


def bench_subscribe(addr, n):
    with varlog.Client(addr) as c:
        _, last, _ = c.peek(1, 1)
        begin = max(1, last.glsn - n + 1)
        count = last.glsn - begin + 1
        c0, t0 = cpu(), time.perf_counter()
        got = 0
        for _ in c.subscribe(1, begin, last.glsn + 1):
            got += 1
        secs, cpus = time.perf_counter() - t0, cpu() - c0
        assert got == count
    line("PySubscribe/iter/ls=1/size=100", got, secs, cpus, "entry")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=500000)
    ap.add_argument("-count", type=int, default=1)
    ap.add_argument("--server", default=os.path.join(HERE, "..", "..", "build", "server",
                                                      "varlog-server"))
    ap.add_argument("filter", nargs="?", default="")
    args = ap.parse_args()
    print(f"goos: linux\ngoarch: amd64\npkg: varlog/python/bench\npython: {sys.version.split()[0]}")
    for _ in range(args.count):
        for name, fn in (("PyAppender/size=100/future=1", lambda a: bench_appender(a, args.n, True)),
                         ("PyAppender/size=100/future=0", lambda a: bench_appender(a, args.n, False))):
            if args.filter not in name and args.filter not in "PySubscribe/iter/ls=1/size=100":
                continue
            srv, addr = start_server(args.server)
            try:
                if args.filter in name:
                    fn(addr)
                if name.endswith("future=0") and args.filter in "PySubscribe/iter/ls=1/size=100":
                    bench_subscribe(addr, args.n)
            finally:
                srv.terminate()
                srv.wait()


if __name__ == "__main__":
    main()
