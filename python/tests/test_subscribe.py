import _thread
import sys
import threading
import time

import pytest

import varlog
from conftest import wait_for


def test_subscribe_reads_a_range_in_glsn_order(client):
    client.append_to(1, 1, [b"a", b"b"])
    client.append_to(1, 2, [b"c"])
    client.append_to(1, 1, [b"d"])
    with client.subscribe(1, 1, 5) as sub:
        entries = list(sub)
        assert sub.ended
        assert sub.next(timeout=0) is None  # after the end
        assert sub.stats()["entries"] == 4
    assert [e.glsn for e in entries] == [1, 2, 3, 4]
    assert [e.data for e in entries] == [b"a", b"b", b"c", b"d"]
    assert [(e.log_stream_id, e.llsn) for e in entries] == [(1, 1), (1, 2), (2, 1), (1, 3)]
    assert all(isinstance(e, varlog.Entry) and e.topic_id == 1 for e in entries)


def test_subscribe_to_reads_one_log_stream_in_llsn_order(client):
    client.append_to(1, 2, [b"x", b"y", b"z"])
    client.append_to(1, 1, [b"other"])
    entries = list(client.subscribe_to(1, 2, 2, 4))
    assert [(e.llsn, e.glsn, e.data) for e in entries] == [(2, 0, b"y"), (3, 0, b"z")]
    with pytest.raises(varlog.InvalidArgument):
        client.subscribe_to(1, 0, 1)


def test_tail_waits_and_times_out(client):
    with client.subscribe(1, 1) as sub:
        t = time.monotonic()
        assert sub.next(timeout=0.2) is None  # the timeout is under test: no sooner than 0.2 s
        assert time.monotonic() - t >= 0.19
        client.append(1, b"late")
        e = sub.next(timeout=10)
        assert e.data == b"late" and e.glsn == 1


def test_bad_ranges_and_unknown_topic(client):
    with pytest.raises(varlog.InvalidArgument):
        client.subscribe(1, 5, 5)
    with pytest.raises(varlog.UnknownTopic):
        client.subscribe(9, 1)
    with pytest.raises(TypeError):
        client.subscribe(1, "one")


def waiting_at(ident, line):
    """Whether thread `ident` stands at `line`, a line with nothing but one call of a C method
    that releases the GIL while it waits (Subscription.next). Asked while this thread holds the
    GIL: the interpreter lets another thread run only at a function's start, a loop's jump and
    the end of a call, none of them on that line before its call returns, so a thread seen at
    it is inside the call, waiting."""
    f = sys._current_frames().get(ident)
    return f is not None and f.f_lineno == line


def test_close_from_another_thread_wakes_the_reader(client):
    sub = client.subscribe(1, 1)
    err = []
    at = []

    def read():
        at.append(sys._getframe().f_lineno + 2)
        try:
            sub.next()  # nothing comes: it waits until the close
        except varlog.Closed as e:
            err.append(e)

    t = threading.Thread(target=read)
    t.start()
    assert wait_for(lambda: at and waiting_at(t.ident, at[0]))  # the reader waits in next
    sub.close()
    t.join(5)
    assert not t.is_alive() and len(err) == 1
    assert "closed" in err[0].text, err[0].text
    with pytest.raises(varlog.Closed) as ei:
        sub.next(timeout=0)
    assert ei.value is err[0]  # the same failure, raised again
    assert sub.closed


def test_keyboard_interrupt_is_noticed_while_waiting(client):
    main = threading.get_ident()
    at = []
    sent = []

    def interrupt_once_waiting():
        if wait_for(lambda: at and waiting_at(main, at[0])):
            sent.append(time.monotonic())
            _thread.interrupt_main()

    sub = client.subscribe(1, 1)
    helper = threading.Thread(target=interrupt_once_waiting)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        at.append(sys._getframe().f_lineno + 1)
        sub.next()  # nothing comes: it waits until the interrupt
    helper.join(5)
    sub.close()
    assert sent
    # how soon the wait notices a signal is under test: the binding looks every few ms
    assert time.monotonic() - sent[0] < 3


def test_trimmed_range_raises_trimmed(client):
    client.append(1, [b"a", b"b", b"c", b"d"])
    client.trim(1, 2)
    sub = client.subscribe(1, 1, 5)
    deadline = time.monotonic() + 10
    with pytest.raises(varlog.Trimmed) as ei:
        while time.monotonic() < deadline:  # the node trims asynchronously
            list(sub)
            sub.close()
            sub = client.subscribe(1, 1, 5)
    assert ei.value.name == "ERR_TRIMMED"
    with pytest.raises(varlog.Trimmed):
        next(sub)  # the failure is raised again


def test_client_close_closes_subscriptions(server):
    c = varlog.Client(server.address)
    sub = c.subscribe(1, 1)
    c.close()
    assert sub.closed
    with pytest.raises(varlog.Closed):
        next(sub)


SUBSCRIBE_TO = "/varlog.snpb.LogIO/SubscribeTo"


def test_health_follows_an_outage(server):
    with varlog.Client(server.address, subscribe_retry_timeout_ms=20000) as c:
        c.append_to(1, 1, [b"a", b"b", b"c"])
        sub = c.subscribe_to(1, 1, 1)
        h = sub.health()
        assert isinstance(h, varlog.SubscriptionHealth)
        assert h == (False, 0, 0, 0, 20000, 0, "")
        assert (h.reconnecting, h.timeout_ms, h.last_failure) == (False, 20000, "")
        assert sub.next(timeout=10).data == b"a"
        # the stream breaks, and every reopening fails until the faults are cleared
        server.fail_next(SUBSCRIBE_TO, 14, "down for the test", 1000000)
        server.stop()
        server.restart()
        # the iterator notices failures while it waits: wait until it says so (keeping what
        # it read meanwhile: b and c may have come before the stop)
        got = []

        def read():
            e = sub.next(timeout=0.05)
            if e is not None:
                got.append(e.data)
            return e

        assert wait_for(lambda: read() is None and sub.health().reconnecting)
        h = sub.health()
        assert h.log_streams_down == 1 and h.log_stream_id == 1 and h.down_ms >= 0, h
        assert h.outages == 1 and "log stream 1" in h.last_failure, h
        server.clear_faults()
        c.append_to(1, 1, [b"d"])
        assert wait_for(lambda: read() or len(got) == 3)
        assert got == [b"b", b"c", b"d"]
        h = sub.health()
        assert not h.reconnecting and h.log_streams_down == 0 and h.outages == 1, h
        sub.close()
        with pytest.raises(varlog.Closed):
            sub.health()
