import os
import subprocess
import sys
import textwrap
import threading

import pytest

import varlog
from conftest import APPEND, wait_for
from subproc import run_script


def test_futures_resolve_in_order_exactly_once(client, unraisable):
    calls = []
    with client.appender(1, log_stream=1) as app:
        futs = [app.append(b"r%d" % i) for i in range(500)]
        for f in futs:
            f.add_done_callback(calls.append)
        assert all(not f.cancel() for f in futs)  # a queued record cannot be unqueued
        assert app.flush() == 0
        assert all(f.done() for f in futs)
        metas = [f.result() for f in futs]
    assert [m.llsn for m in metas] == list(range(1, 501))
    assert [m.glsn for m in metas] == list(range(1, 501))
    assert len(calls) == 500 and len({id(f) for f in calls}) == 500
    assert unraisable == []  # a second set_result would show here
    got = [e.data for e in client.subscribe(1, 1, 501)]
    assert got == [b"r%d" % i for i in range(500)]


def test_topic_wide_appender_and_tuple_form(client):
    with client.appender((1, 2)) as app:
        assert app.append(memoryview(b"xyz")).result(timeout=10).log_stream_id == 2
    with client.appender(1) as app:
        buf = bytearray(b"reuse")
        f = app.append(buf)
        buf[:] = b"XXXXX"  # the record was copied when append returned
        m = f.result(timeout=10)
        assert app.stats()["calls_appended"] == 1
    (e,) = list(client.subscribe(1, m.glsn, m.glsn + 1))
    assert e.data == b"reuse"


def test_bad_input_and_closed_appender(client):
    app = client.appender(1)
    with pytest.raises(TypeError):
        app.append("str")
    with pytest.raises(varlog.InvalidArgument):
        app.append(b"")
    with pytest.raises(ValueError):
        app.append(b"x", timeout=-2)
    app.close()
    assert app.closed
    with pytest.raises(varlog.Closed) as ei:
        app.append(b"x")
    assert ei.value.outcome == "NOT_APPENDED" and isinstance(ei.value, varlog.NotAppended)
    app.close()  # idempotent
    with pytest.raises(varlog.UnknownTopic):
        client.appender(42)
    with pytest.raises(varlog.UnknownLogStream):
        client.appender(1, log_stream=42)


def test_failures_reach_the_futures(server):
    # Counting retries and no read-back: outcomes as the node leaves them (the library's
    # read-back of the dropped append is test_ride_out.c's).
    with varlog.Client(server.address, append_retries=0,
                       append_resolve_maybe_appended=False) as c:
        server.seal(1, 1)
        with c.appender(1, log_stream=1) as app:
            exc = app.append(b"x").exception(timeout=10)
        assert isinstance(exc, varlog.NotAppended) and exc.name == "ERR_SEALED"
        assert exc.text
        server.unseal(1, 1)
        server.drop_stream_after(APPEND, 0)
        with c.appender(1, log_stream=1) as app:
            exc = app.append(b"x").exception(timeout=10)
        assert isinstance(exc, varlog.MaybeAppended) and exc.outcome == "MAYBE_APPENDED"


def test_queue_full_raised_or_waited(server):
    with varlog.Client(server.address, appender_queue_max_records=2,
                       appender_batch_max_records=1, appender_linger_ms=0) as c:
        # The window: the server answers each Append 0.5 s after reading it, so the two first
        # records fill the queue until then (the server can hold a call only for a time, not
        # until told); the checks below take microseconds of it.
        server.delay(APPEND, 500)
        with c.appender(1, log_stream=1) as app:
            f1, f2 = app.append(b"1"), app.append(b"2")
            with pytest.raises(varlog.QueueFull) as ei:
                app.append(b"3", timeout=0)
            assert isinstance(ei.value, varlog.NotAppended) and ei.value.name == "ERR_QUEUE_FULL"
            with pytest.raises(varlog.QueueFull):
                app.append(b"3", timeout=0.05)  # the timeout is under test: it waits, then fails
            assert not f2.done()  # still inside the window
            f3 = app.append(b"3")  # waits, GIL released, until the first two are stored
            assert [f.result(timeout=10).glsn for f in (f1, f2)] == [1, 2]
            assert f3.result(timeout=10).glsn == 3
            # one refusal per QueueFull raised, one wait per call that waited
            assert (app.stats()["queue_full"], app.stats()["queue_full_waits"]) == (2, 2)
            assert (c.stats()["queue_full"], c.stats()["queue_full_waits"]) == (2, 2)


def test_queue_full_counts_what_the_caller_saw(server):
    # append(timeout=...) waits in 100 ms chunks to look for signals between them; the
    # statistics count the one QueueFull the caller got and its one wait, not each chunk.
    with varlog.Client(server.address, appender_queue_max_records=1,
                       appender_batch_max_records=1, appender_linger_ms=0) as c:
        server.delay(APPEND, 3000)  # the window, as in test_queue_full_raised_or_waited
        with c.appender(1, log_stream=1) as app:
            f1 = app.append(b"1")
            with pytest.raises(varlog.QueueFull):
                app.append(b"2", timeout=0.45)  # five chunks
            assert not f1.done()  # still inside the window
            assert (app.stats()["queue_full"], app.stats()["queue_full_waits"]) == (1, 1)
            assert f1.result(timeout=10).glsn == 1
        assert (c.stats()["queue_full"], c.stats()["queue_full_waits"]) == (1, 1)


def test_close_with_work_in_flight_resolves_every_future(server):
    with varlog.Client(server.address, append_retries=0) as c:
        server.delay(APPEND, 400)
        app = c.appender(1, log_stream=1)
        futs = [app.append(b"x") for _ in range(200)]
        app.close(timeout=0)
        assert all(f.done() for f in futs)
        for f in futs:
            e = f.exception()
            assert e is None or isinstance(e, (varlog.NotAppended, varlog.MaybeAppended))
        assert any(isinstance(f.exception(), varlog.VarlogError) for f in futs)


def test_client_close_closes_its_appenders(server, unraisable):
    c = varlog.Client(server.address)
    server.delay(APPEND, 400)
    app = c.appender(1)
    futs = [app.append(b"x") for _ in range(50)]
    c.close()
    assert app.closed and all(f.done() for f in futs)
    with pytest.raises(varlog.Closed):
        app.append(b"x")
    assert unraisable == []


def test_many_threads_append_at_once(client):
    threads, per = 8, 1000
    results = [[] for _ in range(threads)]
    with client.appender(1) as app:
        start = threading.Barrier(threads)

        def produce(k):
            start.wait()
            results[k] = [app.append(b"%d-%d" % (k, i)) for i in range(per)]

        ts = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        app.flush()
    glsns = [f.result().glsn for r in results for f in r]
    assert sorted(glsns) == list(range(1, threads * per + 1))
    # each thread's records are stored in its order within a log stream
    for r in results:
        by_ls = {}
        for f in r:
            by_ls.setdefault(f.result().log_stream_id, []).append(f.result().llsn)
        assert all(v == sorted(v) for v in by_ls.values())
    data = {e.data for e in client.subscribe(1, 1, threads * per + 1)}
    assert data == {b"%d-%d" % (k, i) for k in range(threads) for i in range(per)}


SHUTDOWN = textwrap.dedent("""
    import sys, threading, varlog
    srv = varlog.Server(topics=1, log_streams_per_topic=1)
    c = varlog.Client(srv.address, appender_queue_max_records=2000)
    srv.delay("/varlog.snpb.LogIO/Append", 200)
    app = c.appender(1)
    futs = [app.append(b"x") for _ in range(1000)]
    sub = c.subscribe(1, 1)

    def keep_appending():  # a daemon thread still appending (and waiting on a full queue)
        try:
            while True:
                app.append(b"y")
        except varlog.Closed:
            pass

    threading.Thread(target=keep_appending, daemon=True).start()
    def read():
        try:
            for _ in sub:
                pass
        except varlog.Closed as e:
            assert "closed" in e.text, e.text

    threading.Thread(target=read, daemon=True).start()
    futs[-1].add_done_callback(lambda f: print("resolved", type(f.exception()).__name__,
                                               flush=True))
    print("exiting", flush=True)
    # no close: the atexit hook must close the appender and the client, resolving the futures
    # while Python can still run their callbacks, and then the server is freed
""")


def test_interpreter_exit_with_appends_in_flight():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.run([sys.executable, "-c", SHUTDOWN], capture_output=True, text=True,
                       timeout=30, env=env)
    assert p.returncode == 0, p.stderr
    assert "exiting" in p.stdout and "resolved" in p.stdout, (p.stdout, p.stderr)
    assert "Fatal" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_append_without_future_counts_and_logs_failures(server):
    import logging

    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    log = logging.getLogger("varlog.nofuture")
    h = Keep()
    log.addHandler(h)
    try:
        with varlog.Client(server.address, logger=log, append_retries=0) as c:
            with c.appender(1, log_stream=1) as app:
                assert app.append(b"x", future=False) is None
                assert app.flush() == 0
                assert app.stats()["calls_appended"] == 1
                server.seal(1, 1)
                app.append(b"y", future=False)
                app.flush()
                assert app.stats()["calls_failed"] == 1
        assert any("ERR_SEALED" in m and "NOT_APPENDED" in m for m in seen), seen
    finally:
        log.removeHandler(h)


def test_flush_and_close_from_a_future_callback(client):
    app = client.appender(1)
    done = threading.Event()
    outcomes = []

    def on_done(f):
        # runs on the resolver thread or the appending thread, never on a library thread
        app.flush(timeout=1)
        app.close()
        outcomes.append(f.result().glsn)
        done.set()

    f = app.append(b"x")
    f.add_done_callback(on_done)
    later = []
    try:
        for _ in range(10):
            later.append(app.append(b"y"))
    except varlog.Closed:
        pass  # the callback closed it meanwhile
    assert done.wait(10)
    assert app.closed and outcomes == [1]
    assert all(x.done() for x in later)


def test_future_false_waits_on_a_full_queue(server):
    with varlog.Client(server.address, appender_queue_max_records=2,
                       appender_batch_max_records=1, appender_linger_ms=0) as c:
        server.delay(APPEND, 50)
        with c.appender(1, log_stream=1) as app:
            for _ in range(6):  # from the third on, each waits for room
                assert app.append(b"z", future=False) is None
            assert app.flush() == 0
            assert app.stats()["calls_appended"] == 6


def test_close_while_another_thread_flushes(server):
    with varlog.Client(server.address, append_retries=0) as c:
        server.delay(APPEND, 300)
        app = c.appender(1, log_stream=1)
        futs = [app.append(b"f") for _ in range(20)]
        t = threading.Thread(target=app.flush)
        t.start()
        app.close(timeout=0)
        t.join(10)
        assert not t.is_alive() and all(f.done() for f in futs)


# A done-callback that flushes, closes or appends while more calls settle than the list of
# settled calls holds (65,536): the callback runs inside a drain, so nothing else resolves
# futures meanwhile; the appender must not wait for room only that drain could make.
NESTED_WAIT = textwrap.dedent("""
    import sys, threading, varlog
    variant = sys.argv[1]
    srv = varlog.Server(topics=1, log_streams_per_topic=1)
    # "append": a small queue, so the callback's appends wait for room; otherwise all 90,000 fit
    c = varlog.Client(srv.address, appender_queue_max_records=1000 if variant == "append" else 100000)
    app = c.appender(1)
    main = threading.get_ident()
    adding = inline = False
    done = threading.Event()
    out = {}

    def on_done(f):
        global inline
        if adding and threading.get_ident() == main:
            inline = True  # resolved before add_done_callback: this call is not in a drain
            return
        futs = [app.append(b"x") for _ in range(90000)]
        if variant == "close":
            app.close()
        else:
            out["pending"] = app.flush()
        out["settled"] = sum(f.done() for f in futs)
        done.set()

    for _ in range(1000):
        adding, inline = True, False
        app.append(b"first").add_done_callback(on_done)
        adding = False
        if not inline:
            break
    else:
        sys.exit("every future was resolved before its callback was added")
    done.wait()
    print("pending", out.get("pending"), "settled", out["settled"], flush=True)
    app.close()
    c.close()
    srv.close()
""")


@pytest.mark.parametrize("variant", ["flush", "close", "append"])
def test_callback_flush_close_or_append_with_90000_pending(variant):
    rc, out, err = run_script(NESTED_WAIT, variant, timeout=90)
    assert rc is not None, "deadlock: the callback's %s never returned\n%s%s" % (variant, out, err)
    assert rc == 0, (out, err)
    want = "pending 0 settled 90000" if variant != "close" else "pending None settled 90000"
    assert want in out, (out, err)


# flush() on the main thread; a signal handler that runs at flush's signal check releases the
# GIL (a thread join) while another thread closes the appender with timeout=0. flush must not
# touch the freed C appender afterwards (MALLOC_PERTURB_ makes a use after free visible).
FLUSH_SIGNAL_CLOSE = textwrap.dedent("""
    import dis, signal, sys, threading, varlog
    srv = varlog.Server(topics=1, log_streams_per_topic=1)
    c = varlog.Client(srv.address, append_retries=0)
    srv.delay("/varlog.snpb.LogIO/Append", 120000)  # no answer while the test runs
    app = c.appender(1, log_stream=1)
    futs = [app.append(b"x") for _ in range(20)]
    main = threading.get_ident()
    state = {"closed": False, "early": 0}

    def do_flush():
        return app.flush()

    # inside flush: the frame is at do_flush's call instruction (or past it)
    CALL_AT = min(i.offset for i in dis.get_instructions(do_flush)
                  if i.opname.startswith(("CALL", "PRECALL")))

    def in_flush(frame):
        return frame is not None and frame.f_code is do_flush.__code__ and frame.f_lasti >= CALL_AT

    def handler(signum, frame):
        if not in_flush(frame):
            state["early"] += 1
            return
        t = threading.Thread(target=app.close, kwargs={"timeout": 0})
        t.start()
        t.join()  # releases the GIL: the close runs now, while flush is between two waits
        state["closed"] = True

    signal.signal(signal.SIGUSR1, handler)

    def sender():
        ev = threading.Event()
        for _ in range(60000):  # until main is inside flush (bounded: 60 s of 1 ms waits)
            if in_flush(sys._current_frames().get(main)):
                signal.pthread_kill(main, signal.SIGUSR1)
                return
            ev.wait(0.001)

    threading.Thread(target=sender).start()
    n = do_flush()
    print("flush returned", n, "closed in handler", state["closed"], "early", state["early"],
          "all done", all(f.done() for f in futs), flush=True)
    c.close()
    srv.close()
""")


def test_flush_while_a_signal_handler_closes_the_appender():
    rc, out, err = run_script(FLUSH_SIGNAL_CLOSE, timeout=60, env={"MALLOC_PERTURB_": "165"})
    assert rc == 0, (rc, out, err)
    assert "flush returned 0 closed in handler True early 0 all done True" in out, (out, err)


def test_keyboard_interrupt_in_a_callback_reaches_the_flush(client, unraisable):
    ran = []
    with client.appender(1) as app:
        for _ in range(100):  # a round whose futures were all pending when the callbacks went on
            ran.clear()
            futs = [app.append(b"k%d" % i) for i in range(5)]

            def interrupt(f):
                raise KeyboardInterrupt

            try:
                futs[0].add_done_callback(interrupt)
            except KeyboardInterrupt:
                app.flush()
                continue  # resolved already: the callback ran here, at once
            futs[0].add_done_callback(lambda f: ran.append(0))
            for i in range(1, 5):
                futs[i].add_done_callback(lambda f, i=i: ran.append(i))
            if len(ran) == 0:
                break
            try:
                app.flush()
            except KeyboardInterrupt:
                pass
        else:
            pytest.fail("every round's futures were resolved before their callbacks were added")
        with pytest.raises(KeyboardInterrupt):
            app.flush()  # whichever thread ran the callback, the waiting flush raises it
        assert sorted(ran) == [0, 1, 2, 3, 4]  # the future's later callbacks and the others'
        assert all(f.done() for f in futs)
        assert app.flush() == 0  # raised once
    assert unraisable == []


def test_append_many_records_in_one_call(client):
    with client.appender(1, log_stream=1) as app:
        f1 = app.append([b"a", bytearray(b"b"), memoryview(b"xcx")[1:2]])
        f2 = app.append((b"d",))  # a one-record sequence: still a list
        f3 = app.append(b"e")  # one record: an EntryMeta, as before
        assert app.append([b"f", b"g"], future=False) is None
        m1, m2, m3 = f1.result(timeout=10), f2.result(timeout=10), f3.result(timeout=10)
        assert app.flush() == 0
    assert isinstance(m1, list) and all(isinstance(m, varlog.EntryMeta) for m in m1)
    assert [(m.glsn, m.llsn) for m in m1] == [(1, 1), (2, 2), (3, 3)]  # together, in order
    assert [m.glsn for m in m2] == [4] and isinstance(m3, varlog.EntryMeta) and m3.glsn == 5
    got = [e.data for e in client.subscribe(1, 1, 8)]
    assert got == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]


def test_append_many_bad_input_queues_nothing(server):
    """A refused call (empty, not bytes-like, too many records) raises before anything of it is
    queued, and the calls queued before it are stored all the same."""
    with varlog.Client(server.address, appender_batch_max_records=4) as c:
        with c.appender(1, log_stream=1) as app:
            before = app.append([b"1", b"2"])
            with pytest.raises(varlog.InvalidArgument, match="no records"):
                app.append([])
            with pytest.raises(TypeError, match=r"records\[1\].*'str'"):
                app.append([b"x", "y"])
            with pytest.raises(TypeError, match="not 'str'"):
                app.append("xy")
            with pytest.raises(TypeError):
                app.append([b"x", None], future=False)
            with pytest.raises(varlog.InvalidArgument) as ei:
                app.append([b"x"] * 5)  # appender.batch.max.records is 4
            assert ei.value.outcome == "NOT_APPENDED", ei.value
            with pytest.raises(varlog.InvalidArgument):
                app.append([b"x", b""])  # an empty record
            after = app.append([b"3", b"4", b"5", b"6"])
            assert [m.glsn for m in before.result(timeout=10)] == [1, 2]
            assert [m.glsn for m in after.result(timeout=10)] == [3, 4, 5, 6]
            assert app.stats()["calls_appended"] == 2
        got = [e.data for e in c.subscribe(1, 1, 7)]
        assert got == [b"1", b"2", b"3", b"4", b"5", b"6"]
        p = c.peek(1, 1)[1]
        assert p.glsn == 6  # nothing of the refused calls was stored


def test_append_many_waits_for_room_as_one_does(server):
    with varlog.Client(server.address, appender_queue_max_records=3,
                       appender_batch_max_records=3, appender_linger_ms=0) as c:
        server.delay(APPEND, 500)  # the window, as test_queue_full_raised_or_waited's
        with c.appender(1, log_stream=1) as app:
            f1 = app.append([b"1", b"2"])
            with pytest.raises(varlog.QueueFull):
                app.append([b"3", b"4"], timeout=0)  # 2 + 2 records > 3: nothing queued
            f2 = app.append([b"3", b"4"])  # waits, GIL released, for the first call
            assert [m.glsn for m in f1.result(timeout=10)] == [1, 2]
            assert [m.glsn for m in f2.result(timeout=10)] == [3, 4]
