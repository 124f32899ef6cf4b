import pytest

import varlog
from conftest import APPEND


def test_admin_topics_and_log_streams(server):
    with varlog.Admin(server.address) as adm:
        assert [t["topic_id"] for t in adm.list_topics()] == [1]
        t = adm.add_topic()
        assert t == 2 and adm.get_topic(t)["log_streams"] == 0
        ls = adm.add_log_stream(t)
        assert ls["topic_id"] == t and ls["status"] == "RUNNING" and ls["replicas"] == [1]
        assert adm.get_log_stream(t, ls["log_stream_id"])["log_stream_id"] == ls["log_stream_id"]
        assert [x["log_stream_id"] for x in adm.list_log_streams(1)] == [1, 2]
        assert adm.seal(1, 1) == 0
        assert adm.get_log_stream(1, 1)["status"] == "SEALED"
        assert adm.unseal(1, 1)["status"] == "RUNNING"
        with pytest.raises(varlog.UnknownTopic):
            adm.get_topic(99)
        with pytest.raises(varlog.UnknownLogStream):
            adm.get_log_stream(1, 99)
        with pytest.raises(ValueError):
            adm.get_topic(1, timeout=-3)
        with pytest.raises(varlog.InvalidArgument):
            adm.get_topic(1, timeout=0)  # the library refuses 0
        assert adm.list_storage_nodes()[0]["address"] == server.address
        assert adm.get_storage_node(1)["storage_node_id"] == 1
        with pytest.raises(varlog.VarlogError) as ei:
            adm.get_storage_node(9)
        assert ei.value.name == "ERR_RPC_NOT_FOUND"
        mrs = adm.list_mr_nodes()
        assert len(mrs) == 1 and mrs[0]["rpc_addr"]
        members = adm.get_mr_members()
        assert members["replication_factor"] == 1 and len(members["members"]) == 1
        adm.unregister_topic(t)
    with pytest.raises(varlog.Closed):
        adm.list_topics()


def test_admin_unreachable():
    with varlog.Admin("127.0.0.1:1") as adm:
        with pytest.raises(varlog.VarlogError) as ei:
            adm.list_topics(timeout=1)
        assert ei.value.name.startswith("ERR_RPC_") or ei.value.name == "ERR_TIMED_OUT"


def test_server_faults_stop_restart(server, client):
    assert server.address.startswith("127.0.0.1:") and server.port > 0
    client.append(1, b"abc")
    assert server.stored_bytes == 3 and server.call_count(APPEND) == 1
    topic = server.add_topic()
    ls = server.add_log_stream(topic)
    client.refresh()
    assert client.log_streams(topic) == [ls]
    server.stop()
    with pytest.raises(varlog.VarlogError):
        server.stop()  # already stopped: ERR_STATE
    # A call while it is down fails, and the client has seen the outage. Without one, a call
    # right after a restart of a millisecond could race the client's reading of the old
    # connection's close and go on it: UNAVAILABLE, MAYBE_APPENDED, as in any gRPC client.
    with pytest.raises(varlog.VarlogError):
        client.append(1, b"x", timeout=2)
    server.restart()
    client.append(1, b"d", timeout=10)
    with pytest.raises(varlog.InvalidArgument):
        server.fail_next("/no/such", 14)
    with pytest.raises(varlog.InvalidArgument):
        varlog.Server(listen_address="0.0.0.0:0")
    server.close()
    with pytest.raises(varlog.Closed):
        server.add_topic()


def test_server_close_while_another_thread_restarts_it():
    """close waits for a stop or restart running on another thread (GIL released) instead of
    freeing the server under it."""
    import threading

    srv = varlog.Server()
    one = threading.Event()
    ended = []

    def restart():
        try:
            while True:
                srv.restart()
                one.set()
        except varlog.Closed:
            ended.append("closed")
        finally:
            one.set()

    t = threading.Thread(target=restart)
    t.start()
    assert one.wait(30)
    srv.close()
    t.join(30)
    assert not t.is_alive() and ended == ["closed"]
