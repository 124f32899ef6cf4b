"""Fixtures: a fresh embedded server (varlog.Server) and a client of it per test."""

import faulthandler
import os
import sys
import threading

import pytest

import varlog

APPEND = "/varlog.snpb.LogIO/Append"


@pytest.fixture(autouse=True)
def hang_backstop():
    """Behind pytest-timeout (run-tests.sh --timeout): a test still running 15 s past its bound
    did not get back to the interpreter for the timeout's signal to fail it; faulthandler's
    own thread (no GIL needed) writes every thread's stack to VARLOG_PY_HANG_FD, a copy of the
    stderr pytest does not capture, and ends the run with status 1. Only where run-tests.sh
    set both (a run by hand, e.g. under valgrind, has no bound unless it sets them)."""
    limit, fd = os.environ.get("VARLOG_PY_TEST_TIMEOUT"), os.environ.get("VARLOG_PY_HANG_FD")
    if not limit or not fd:
        yield
        return
    faulthandler.dump_traceback_later(float(limit) + 15, exit=True, file=int(fd))
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def server():
    with varlog.Server(topics=1, log_streams_per_topic=2) as srv:
        yield srv


@pytest.fixture
def client(server):
    with varlog.Client(server.address, open_timeout_ms=5000) as c:
        yield c


@pytest.fixture
def unraisable():
    """Collects what Python could not raise (e.g. a future resolved twice)."""
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    yield seen
    sys.unraisablehook = old


def wait_for(pred, timeout=10.0):
    ev = threading.Event()
    for _ in range(int(timeout * 100)):
        if pred():
            return True
        ev.wait(0.01)
    return pred()
