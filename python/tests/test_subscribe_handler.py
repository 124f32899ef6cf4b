"""Subscriptions with a handler (subscribe(..., handler=fn)): the thread that runs it, its end,
what it raises, and close from elsewhere and from inside it."""

import logging
import threading

import pytest

import varlog
from conftest import wait_for


def test_handler_gets_the_range_on_the_subscription_thread(client):
    client.append_to(1, 1, [b"a", b"b"])
    client.append_to(1, 2, [b"c"])
    got, threads = [], set()

    def handler(entry):
        got.append((entry.glsn, entry.data))
        with open("/proc/self/task/%d/comm" % threading.get_native_id()) as f:
            threads.add(f.read().strip())  # the OS thread's name

    sub = client.subscribe(1, 1, 4, handler=handler)
    assert sub.wait(timeout=10) is True
    assert sub.ended and got == [(1, b"a"), (2, b"b"), (3, b"c")]
    assert threads == {"varlog-sub"}, threads
    with pytest.raises(varlog.VarlogError) as ei:
        sub.next(timeout=0)
    assert ei.value.name == "ERR_STATE"
    with pytest.raises(varlog.VarlogError):
        iter(sub)
    sub.close()
    assert sub.closed and sub.wait(timeout=0) is True

    lls = []
    with client.subscribe_to(1, 1, 2, 3, handler=lambda e: lls.append(e.llsn)) as s2:
        assert s2.wait(timeout=10)
    assert lls == [2]


def test_wait_times_out_while_tailing(client):
    got = []
    with client.subscribe(1, 1, handler=got.append) as sub:
        assert sub.wait(timeout=0.05) is False  # the timeout is under test: it returns
        client.append(1, b"x")
        assert wait_for(lambda: len(got) == 1)
        assert not sub.ended
    assert sub.wait(timeout=0) is True  # closed: over


def test_handler_exception_ends_the_subscription(server):
    logger = logging.getLogger("varlog.test.handler")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger.addHandler(Keep())
    with varlog.Client(server.address, logger=logger) as c:
        c.append(1, [b"1", b"2", b"3", b"4", b"5"])
        got = []
        boom = ValueError("no third entry")

        def handler(entry):
            got.append(entry.data)
            if entry.glsn == 3:
                raise boom

        sub = c.subscribe(1, 1, handler=handler)
        with pytest.raises(ValueError) as ei:
            sub.wait(timeout=10)
        assert ei.value is boom
        assert got == [b"1", b"2", b"3"]  # no handler after the one that raised
        assert sub.closed and not sub.ended
        with pytest.raises(ValueError):
            sub.wait()  # raised again
        assert any(r.levelno == logging.ERROR and "handler raised" in r.getMessage()
                   for r in records)

        # KeyboardInterrupt (or SystemExit) raised by a handler: the same, raised by wait()
        # on the waiting thread
        def interrupt(entry):
            raise KeyboardInterrupt

        sub = c.subscribe(1, 1, handler=interrupt)
        with pytest.raises(KeyboardInterrupt):
            sub.wait(timeout=10)
        assert sub.closed


def test_close_from_another_thread_waits_for_the_running_handler(client):
    client.append(1, [b"%d" % i for i in range(50)])
    inside, release = threading.Event(), threading.Event()
    state = {"closed_returned": False, "late": 0, "calls": 0}

    def handler(entry):
        if state["closed_returned"]:
            state["late"] += 1
        state["calls"] += 1
        if state["calls"] == 2:
            inside.set()
            release.wait(10)  # held inside the handler until the close waits
            try:
                sub.health()  # the close waits for this handler: it must not wait for it
            except varlog.Closed:
                state["health"] = "closed"

    sub = client.subscribe(1, 1, handler=handler)
    assert inside.wait(10)
    done = threading.Event()

    def close():
        sub.close()
        state["closed_returned"] = True
        done.set()

    t = threading.Thread(target=close)
    t.start()
    assert wait_for(lambda: sub.closed)  # the close began (the handle is taken)
    assert not done.is_set()  # it waits for the handler
    release.set()
    t.join(10)
    assert done.is_set() and state["late"] == 0 and state["health"] == "closed"
    calls = state["calls"]
    client.append(1, b"more")
    assert sub.wait(timeout=0) is True and state["calls"] == calls


def test_close_from_inside_the_handler(client):
    client.append(1, [b"a", b"b", b"c", b"d"])
    got = []
    holder = {}

    def handler(entry):
        got.append(entry.data)
        if len(got) == 2:
            holder["sub"].close()  # returns at once; no handler after this one

    started = threading.Event()

    def handler_waiting(entry):
        started.wait(10)
        handler(entry)

    holder["sub"] = client.subscribe(1, 1, handler=handler_waiting)
    started.set()
    assert holder["sub"].wait(timeout=10) is True
    assert got == [b"a", b"b"] and holder["sub"].closed


def test_handler_refusals_and_client_close(server):
    with varlog.Client(server.address) as c:
        async def coro(entry):
            pass

        with pytest.raises(TypeError, match="async for"):
            c.subscribe(1, 1, handler=coro)
        with pytest.raises(TypeError):
            c.subscribe(1, 1, handler=42)
        with pytest.raises(varlog.UnknownTopic):
            c.subscribe(9, 1, handler=print)
        sub = c.subscribe(1, 1, handler=lambda e: None)
    assert sub.closed and sub.wait(timeout=0) is True  # the client's close closed it
