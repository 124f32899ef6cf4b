"""varlog.AppendFuture (python/src/future.c): a concurrent.futures.Future whose Condition is
created only when something waits on it or adds a callback, and which the appender resolves
without one when nobody did. These tests try to break that lazy path: waiters on other
threads racing the resolution, wait / as_completed, callbacks, failures, asyncio."""

import asyncio
import concurrent.futures as cf
import queue
import sys
import threading
import time

import pytest

import varlog
from conftest import APPEND


@pytest.fixture
def busy_switching():
    """Switch threads as often as the interpreter can, so that a waiter is preempted inside
    its creation of the Condition and the resolver runs in that window."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_it_is_a_concurrent_future(client):
    with client.appender(1, log_stream=1) as app:
        f = app.append(b"x")
        assert type(f) is varlog.AppendFuture
        assert isinstance(f, cf.Future)
        assert f.cancel() is False and not f.cancelled()
        m = f.result(timeout=10)
        assert isinstance(m, varlog.EntryMeta) and m.glsn == 1
        assert f.done() and f.exception() is None and not f.running()
        assert f.cancel() is False
        assert "state=finished returned EntryMeta" in repr(f)
    with pytest.raises(TypeError):
        varlog.AppendFuture(1)


def test_a_future_nobody_waits_on_gets_no_condition(client):
    # the point of the type: no threading.Condition per record (python/README.md, Benchmark)
    with client.appender(1, log_stream=1) as app:
        futs = [app.append(b"x") for _ in range(300)]
        assert app.flush() == 0
    assert all(f.done() for f in futs)
    assert [f.result().glsn for f in futs] == list(range(1, 301))
    assert all(f.exception() is None for f in futs)
    assert all(getattr(f, "_lazy_condition", None) is None for f in futs)


def test_resolved_exactly_once():
    f = varlog.AppendFuture()
    assert not f.done()
    with pytest.raises(cf.TimeoutError):
        f.result(timeout=0.01)
    with pytest.raises(cf.TimeoutError):
        f.exception(timeout=0)
    f.set_result(1)
    with pytest.raises(cf.InvalidStateError):
        f.set_result(2)
    with pytest.raises(cf.InvalidStateError):
        f.set_exception(ValueError("late"))
    assert f.result() == 1 and f.exception() is None
    g = varlog.AppendFuture()
    g.set_exception(ValueError("e"))  # fast path: no Condition yet
    with pytest.raises(cf.InvalidStateError):
        g.set_result(2)
    with pytest.raises(ValueError, match="e"):
        g.result()


def test_waiters_on_other_threads_are_woken_racing_the_resolution(busy_switching):
    """Three threads wait in result() / exception() on each future while the main thread
    resolves it, started together: every waiter must return its outcome, whichever of the
    fast (no Condition yet) and base (notify) paths the resolution took."""
    rounds = 3000
    futs = [varlog.AppendFuture() for _ in range(rounds)]
    nwaiters = 3
    start = threading.Barrier(nwaiters + 1, timeout=10)
    got = [[] for _ in range(nwaiters)]
    failed = []

    def waiter(k):
        try:
            for i in range(rounds):
                start.wait()
                f = futs[i]
                t0 = time.monotonic()
                if i % 2 == 0:
                    got[k].append(f.result(timeout=5))
                else:
                    got[k].append(f.exception(timeout=5).args[0])
                # the base class checks _state again after its wait times out: a waiter the
                # resolution did not notify still returns, but only then
                if time.monotonic() - t0 > 2:
                    raise AssertionError(f"round {i}: the waiter was not woken by the resolution")
        except BaseException as e:
            failed.append(e)
            start.abort()

    threads = [threading.Thread(target=waiter, args=(k,)) for k in range(nwaiters)]
    for t in threads:
        t.start()
    try:
        for i in range(rounds):
            f = futs[i]
            start.wait()
            for _ in range(i % 7):  # vary where the resolution lands in the waiters' steps
                pass
            if i % 2 == 0:
                f.set_result(i)
            else:
                f.set_exception(ValueError(i))
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join(timeout=30)
    assert not failed, failed[:1]
    assert all(g == list(range(rounds)) for g in got)
    # the base path serves _waiters, the fast path never creates them: both paths were
    # taken, else the race was not exercised
    fast = sum(getattr(f, "_lazy_waiters", None) is None for f in futs)
    assert 0 < fast < rounds, fast


def test_waiters_on_appender_futures(client, busy_switching):
    """The appender's own resolvers (the producer's next append, the resolver thread)
    against result() on other threads."""
    q = queue.Queue()
    metas = []
    failed = []
    lock = threading.Lock()

    def consumer():
        while True:
            f = q.get()
            if f is None:
                return
            t0 = time.monotonic()
            m = f.result(timeout=10)
            if time.monotonic() - t0 > 2:  # woken by its timeout, not by the resolution
                failed.append(m)
            with lock:
                metas.append(m.glsn)

    threads = [threading.Thread(target=consumer) for _ in range(2)]
    for t in threads:
        t.start()
    with client.appender(1, log_stream=1) as app:
        for i in range(3000):
            q.put(app.append(b"%d" % i))
        for _ in threads:
            q.put(None)
        for t in threads:
            t.join(timeout=30)
            assert not t.is_alive()
    assert sorted(metas) == list(range(1, 3001))
    assert not failed


def test_wait_and_as_completed_over_many_futures(client):
    with client.appender(1, log_stream=1) as app:
        futs = [app.append(b"w") for _ in range(5000)]
        # called at once, racing the resolution of the rest
        done, not_done = cf.wait(futs, timeout=30)
        assert len(done) == 5000 and not not_done
        futs = [app.append(b"a") for _ in range(5000)]
        seen = list(cf.as_completed(futs, timeout=30))
        assert len(seen) == 5000 and set(seen) == set(futs)
        futs = [app.append(b"f") for _ in range(100)]
        done, _ = cf.wait(futs, timeout=30, return_when=cf.FIRST_COMPLETED)
        assert done
        assert app.flush() == 0
        done, not_done = cf.wait(futs, timeout=0)  # all done now: no waiting at all
        assert len(done) == 100 and not not_done
    assert sorted(f.result().glsn for f in futs) == list(range(10001, 10101))


def test_done_callbacks_run_once_before_and_after_resolution(client):
    calls = {}

    def cb(f):
        calls.setdefault(id(f), []).append(threading.current_thread())

    with client.appender(1, log_stream=1) as app:
        early = [app.append(b"e") for _ in range(500)]
        for f in early:
            f.add_done_callback(cb)  # some already resolved by now, most not
        assert app.flush() == 0
        me = threading.current_thread()
        late = [app.append(b"l") for _ in range(100)]
        assert app.flush() == 0
        for f in late:
            f.add_done_callback(cb)
            assert calls[id(f)] == [me]  # already done: at once, on the caller
    for f in early + late:
        assert len(calls[id(f)]) == 1


def test_callbacks_run_on_the_resolving_thread():
    f, g = varlog.AppendFuture(), varlog.AppendFuture()
    where = []
    f.add_done_callback(lambda fut: where.append((fut, threading.current_thread())))
    g.add_done_callback(lambda fut: where.append((fut, threading.current_thread())))
    t = threading.Thread(target=lambda: (f.set_result(1), g.set_exception(KeyError(2))))
    t.start()
    t.join(timeout=10)
    assert where == [(f, t), (g, t)]


def test_failures_through_the_future_with_a_waiter(server):
    with varlog.Client(server.address, append_retries=0,
                       append_resolve_maybe_appended=False) as c:
        server.seal(1, 1)
        server.delay(APPEND, 200)
        with c.appender(1, log_stream=1) as app:
            f = app.append(b"x")
            box = []
            t = threading.Thread(target=lambda: box.append(f.exception(timeout=10)))
            t.start()
            with pytest.raises(varlog.NotAppended) as ei:
                f.result(timeout=10)
            t.join(timeout=10)
            assert box == [ei.value] and ei.value.name == "ERR_SEALED"
            g = app.append(b"y")
            assert app.flush() == 0
        # resolved with nobody waiting: the fast path
        assert getattr(g, "_lazy_condition", None) is None
        assert isinstance(g.exception(), varlog.NotAppended)
        with pytest.raises(varlog.NotAppended):
            g.result()
        server.clear_faults()
        server.unseal(1, 1)
        server.drop_stream_after(APPEND, 0)
        with c.appender(1, log_stream=1) as app:
            h = app.append(b"z")
            seen = []
            h.add_done_callback(lambda fut: seen.append(fut.exception()))
            exc = h.exception(timeout=10)
        assert isinstance(exc, varlog.MaybeAppended) and seen == [exc]


def test_asyncio_wrap_future(server):
    with varlog.Client(server.address, append_retries=0) as c, \
         c.appender(1, log_stream=1) as app:

        async def main():
            metas = await asyncio.gather(
                *(asyncio.wrap_future(app.append(b"%d" % i)) for i in range(200)))
            server.seal(1, 1)
            with pytest.raises(varlog.NotAppended):
                await asyncio.wait_for(asyncio.wrap_future(app.append(b"s")), 10)
            return metas

        metas = asyncio.run(main())
    assert [m.glsn for m in metas] == list(range(1, 201))
