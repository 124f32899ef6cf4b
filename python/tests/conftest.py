"""Fixtures: a fresh embedded server (varlog.Server) and a client of it per test."""

import sys
import threading

import pytest

import varlog

APPEND = "/varlog.snpb.LogIO/Append"


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
