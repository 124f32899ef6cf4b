import logging
import textwrap
import threading

import pytest

import varlog
from conftest import APPEND
from subproc import run_script


def test_topics_and_log_streams(client):
    assert client.topics() == [1]
    assert client.log_streams(1) == [1, 2]
    assert client.log_streams(1, appendable=True) == [1, 2]
    with pytest.raises(varlog.UnknownTopic) as ei:
        client.log_streams(7)
    assert ei.value.name == "ERR_UNKNOWN_TOPIC" and ei.value.code < 0
    assert client.refresh() == client.applied_index


def test_append_returns_metas_in_record_order(client):
    (m,) = client.append(1, b"one")
    assert isinstance(m, varlog.EntryMeta) and m.topic_id == 1 and m.glsn == 1 and m.llsn == 1
    metas = client.append(1, [b"a", bytearray(b"b"), memoryview(b"xcx")[1:2]], timeout=5)
    assert [x.glsn for x in metas] == [2, 3, 4]
    assert len({x.log_stream_id for x in metas}) == 1  # one batch, one log stream
    metas = client.append_to(1, 2, [b"p", b"q"])
    assert [(x.log_stream_id, x.llsn) for x in metas][1][0] == 2
    data = [e.data for e in client.subscribe(1, 1, 7)]
    assert data == [b"one", b"a", b"b", b"c", b"p", b"q"]


def test_bad_input_raises_type_and_value_errors(client):
    with pytest.raises(TypeError):
        client.append(1, "text is not bytes")
    with pytest.raises(TypeError):
        client.append(1, [b"ok", 3])
    with pytest.raises(ValueError) as ei:
        client.append(1, b"")
    assert isinstance(ei.value, varlog.InvalidArgument)
    assert ei.value.outcome == "NOT_APPENDED" and "empty" in ei.value.text
    with pytest.raises(ValueError):
        client.append(1, [])
    with pytest.raises(ValueError):
        client.append(1, b"x", timeout=-1)
    with pytest.raises(ValueError):
        client.append(1, b"x", timeout=0)
    with pytest.raises(varlog.InvalidArgument):
        client.append_to(1, 0, b"x")


def test_properties_as_dict_and_keywords(server):
    with pytest.raises(varlog.InvalidArgument) as ei:
        varlog.Client(server.address, append_retries=1000)
    assert "append.retries" in ei.value.text
    with pytest.raises(ValueError):
        varlog.Client(server.address, properties={"no.such.property": "1"})
    with pytest.raises(TypeError):
        varlog.Client(server.address, append_retries=1.5)
    with varlog.Client([server.address], properties={"open.timeout.ms": 3000},
                       append_retry_maybe_appended=False, debug=["append", "rpc"]) as c:
        assert c.append(1, b"x")


def test_not_appended_on_a_sealed_log_stream(client, server):
    # A sealed log stream is waited for (append.retries -1) until the call's timeout, which
    # then fails NotAppended with the last cause.
    server.seal(1, 1)
    with pytest.raises(varlog.NotAppended) as ei:
        client.append_to(1, 1, b"x", timeout=0.5)
    e = ei.value
    assert e.outcome == "NOT_APPENDED" and e.name == "ERR_TIMED_OUT" and "sealed" in e.text
    assert not isinstance(e, varlog.MaybeAppended)
    with pytest.raises(varlog.NotAppended) as ei:
        client.append(9, b"x", timeout=2)
    assert ei.value.name == "ERR_UNKNOWN_TOPIC"


def test_maybe_appended_when_the_answer_is_lost(server):
    # Without the library's read-back, a lost answer is reported as it is.
    with varlog.Client(server.address, append_retries=0,
                       append_resolve_maybe_appended=False) as c:
        server.drop_stream_after(APPEND, 0)
        with pytest.raises(varlog.MaybeAppended) as ei:
            c.append_to(1, 1, b"x", timeout=5)
        assert ei.value.outcome == "MAYBE_APPENDED"
        assert ei.value.name.startswith("ERR_RPC_")
        server.clear_faults()
        server.delay(APPEND, 2000)
        with pytest.raises(varlog.MaybeAppended) as ei:
            c.append_to(1, 1, b"x", timeout=0.2)
        assert ei.value.name == "ERR_TIMED_OUT"


def test_lost_answer_read_back_from_the_log(server):
    # By default (append.resolve.maybe.appended) the library reads an ambiguous append back:
    # stored before the answer was lost, it is reported stored, at the GLSN it has.
    with varlog.Client(server.address) as c:
        first = c.append_to(1, 1, b"before")[0]
        server.drop_stream_after_write(APPEND, 0)
        meta = c.append_to(1, 1, b"answer-lost", timeout=10)[0]
        assert meta.glsn == first.glsn + 1
        assert c.stats()["resolved_found"] == 1
        server.drop_stream_after_write(APPEND, 0)
        with c.appender(1, log_stream=1) as app:
            assert app.append(b"answer-lost-too").result(timeout=10).glsn == meta.glsn + 1
        assert c.stats()["resolved_found"] == 2


def test_unreachable_cluster_fails_to_open():
    with pytest.raises(varlog.VarlogError) as ei:
        varlog.Client("127.0.0.1:1", open_timeout_ms=200)
    assert ei.value.text and ei.value.outcome is None


def test_closed_client_raises_closed(server):
    c = varlog.Client(server.address)
    with c:
        pass
    assert c.closed
    for call in (c.topics, lambda: c.append(1, b"x"), lambda: c.subscribe(1, 1), c.stats,
                 lambda: c.appender(1)):
        with pytest.raises(varlog.Closed):
            call()
    c.close()  # idempotent


def test_peek_and_trim(client):
    client.append_to(1, 1, [b"a", b"b", b"c"])
    first, last, complete = client.peek(1, 1)
    assert (first.llsn, last.llsn, last.glsn, complete) == (1, 3, 3, True)
    empty_first, empty_last, _ = client.peek(1, 2)
    assert empty_first.glsn == empty_last.glsn == 0
    client.trim(1, 2)
    with pytest.raises(varlog.UnknownTopic):
        client.trim(5, 1)
    with pytest.raises(varlog.InvalidArgument):
        client.trim(1, 0)


def test_stats_is_a_dict(client):
    client.append(1, b"x")
    s = client.stats()
    assert isinstance(s, dict) and "uptime_ms" in s


def test_library_log_goes_to_logging(server):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    log = logging.getLogger("varlog.test")
    log.setLevel(logging.DEBUG)
    h = Keep()
    log.addHandler(h)
    try:
        with varlog.Client(server.address, logger=log, log_level="debug", debug="all") as c:
            c.append(1, b"x")
        n = len(records)
        assert n > 0
        assert any(r.levelno == logging.DEBUG for r in records)
        assert all(r.getMessage().startswith("[") for r in records)
    finally:
        log.removeHandler(h)
    # nothing after close returned
    assert len(records) == n


def test_close_closes_appenders_created_during_it(server):
    """Threads keep creating appenders while two threads close the client, and a done-callback
    that the close runs creates one: when either close returns, every appender ever returned
    is closed (none is left with its threads)."""
    c = varlog.Client(server.address)
    made, problems, refused = [], [], []
    enough = threading.Event()
    server.delay(APPEND, 120000)  # no answer while the test runs: the close fails the call
    first = c.appender(1)

    def on_done(f):  # runs during the client's close, which closes `first`
        try:
            made.append(c.appender(1))
        except varlog.Closed:
            refused.append(f.exception())

    first.append(b"x").add_done_callback(on_done)

    def create():
        try:
            for _ in range(2000):
                made.append(c.appender(1))
                if len(made) >= 20:
                    enough.set()
        except varlog.Closed:
            pass
        finally:
            enough.set()

    def close():
        c.close()
        still_open = sum(not a.closed for a in list(made))
        if still_open:
            problems.append("%d of %d appenders open after close returned" % (still_open, len(made)))

    creators = [threading.Thread(target=create) for _ in range(3)]
    for t in creators:
        t.start()
    assert enough.wait(30)
    closers = [threading.Thread(target=close) for _ in range(2)]
    for t in closers:
        t.start()
    for t in closers + creators:
        t.join(60)
    assert not any(t.is_alive() for t in closers + creators)
    leftover = [a for a in made if not a.closed]
    for a in leftover:  # so that a failure does not leave threads behind
        a.close(timeout=0)
    assert problems == [] and leftover == []
    assert first.closed and len(refused) == 1 and isinstance(refused[0], varlog.VarlogError)


FORK = textwrap.dedent("""
    import os, signal, sys, threading, varlog
    srv = varlog.Server(topics=1, log_streams_per_topic=1)
    addr = srv.address
    c = varlog.Client(addr)
    admin = varlog.Admin(addr)
    app = c.appender(1)
    futs = [app.append(b"x") for _ in range(1000)]
    sub = c.subscribe(1, 1)
    pid = os.fork()
    if pid == 0:
        # the child: the parent's handles are closed here without being touched
        assert c.closed and app.closed and sub.closed
        try:
            app.append(b"y")
            sys.exit("append in the child did not raise")
        except varlog.Closed:
            pass
        try:
            srv.address
            sys.exit("the parent's server is usable in the child")
        except varlog.Closed:
            pass
        for make in (lambda: varlog.Client(addr), lambda: varlog.Admin(addr), varlog.Server):
            try:
                make()  # gRPC's threads are not in the child: it would hang, it raises instead
                sys.exit("the library started in the child of a fork")
            except varlog.VarlogError as e:
                assert e.name == "ERR_STATE" and "fork" in e.text, e
        print("child exiting", flush=True)
        sys.exit(0)  # a normal exit: the atexit hook and finalization run in the child
    ev = threading.Event()
    for _ in range(30000):  # 30 s of 1 ms waits for the child's exit
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            break
        ev.wait(0.001)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.exit("the child hung at exit")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # the parent's handles still work
    assert app.flush() == 0 and all(f.result().glsn > 0 for f in futs)
    assert next(sub).glsn == 1
    print("parent ok", flush=True)
    sub.close(); app.close(); c.close(); admin.close(); srv.close()
""")


def test_fork_child_exits_and_leaves_the_parents_handles_alone():
    rc, out, err = run_script(FORK, timeout=60)
    assert rc == 0, (rc, out, err)
    assert "child exiting" in out and "parent ok" in out, (out, err)


def test_keyboard_interrupt_in_a_callback_reaches_client_close(server, unraisable):
    c = varlog.Client(server.address, append_retries=0)
    server.delay(APPEND, 120000)  # no answer while the test runs: the close fails the call
    app = c.appender(1)
    f = app.append(b"x")
    ran = []

    def interrupt(_):
        raise KeyboardInterrupt

    f.add_done_callback(interrupt)
    f.add_done_callback(lambda _: ran.append("later"))
    with pytest.raises(KeyboardInterrupt):
        c.close()
    assert c.closed and app.closed and ran == ["later"]
    assert isinstance(f.exception(), varlog.VarlogError)
    c.close()  # raised once
    assert unraisable == []


def prom_samples(text, name):
    """The samples of one metric family in a Prometheus text: [(labels, value)]."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, value = line.rsplit(" ", 1)
            out.append((head[len(name):], float(value)))
    return out


def test_metrics_prometheus_text(client):
    client.append_to(1, 1, [b"a", b"b", b"c"])
    assert [e.data for e in client.subscribe(1, 1, 4)] == [b"a", b"b", b"c"]
    text = client.metrics()
    assert isinstance(text, str) and text.endswith("\n")
    assert "# TYPE messaging_client_sent_messages_total counter" in text
    sent = [(lab, v) for lab, v in prom_samples(text, "messaging_client_sent_messages_total")
            if "error_type" not in lab]
    assert sent and sum(v for _, v in sent) == 3, sent
    assert all('messaging_operation_name="send"' in lab for lab, _ in sent), sent
    consumed = prom_samples(text, "messaging_client_consumed_messages_total")
    assert sum(v for _, v in consumed) == 3, consumed
    client.close()
    with pytest.raises(varlog.Closed):
        client.metrics()
