import logging

import pytest

import varlog
from conftest import APPEND


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
    server.seal(1, 1)
    with pytest.raises(varlog.NotAppended) as ei:
        client.append_to(1, 1, b"x", timeout=5)
    e = ei.value
    assert e.outcome == "NOT_APPENDED" and e.name == "ERR_SEALED" and e.text
    assert not isinstance(e, varlog.MaybeAppended)
    with pytest.raises(varlog.NotAppended) as ei:
        client.append(9, b"x", timeout=2)
    assert ei.value.name == "ERR_UNKNOWN_TOPIC"


def test_maybe_appended_when_the_answer_is_lost(server):
    with varlog.Client(server.address, append_retries=0) as c:
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
