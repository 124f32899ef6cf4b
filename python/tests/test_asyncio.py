"""asyncio: awaiting appends, async for over a subscription (waits off the loop, cancellation,
close from elsewhere). Every wait is for an event (a tick count, a read under way, a done
future), each bounded by the suite's per-test timeout."""

import asyncio
import threading

import pytest

import varlog
from conftest import wait_for


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def until(pred):
    """Lets the loop run until pred() holds (each turn yields to the other tasks)."""
    while not pred():
        await asyncio.sleep(0.001)


class Ticker:
    """A coroutine that counts turns of the loop: it ticks only while the loop is free."""

    def __init__(self):
        self.ticks = 0
        self.task = asyncio.ensure_future(self._run())

    async def _run(self):
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1

    def stop(self):
        self.task.cancel()


def test_await_many_appends(client):
    async def main():
        with client.appender(1, log_stream=1) as app:
            futs = [app.append(b"r%d" % i) for i in range(3000)]
            metas = [await f for f in futs]  # some resolved already, some pending
            more = await asyncio.gather(*(app.append(b"g%d" % i) for i in range(200)))
            many = await app.append([b"m1", b"m2"])
        return metas, more, many

    metas, more, many = run(main())
    assert [m.glsn for m in metas] == list(range(1, 3001))
    assert [m.glsn for m in more] == list(range(3001, 3201))
    assert [m.glsn for m in many] == [3201, 3202]
    got = [e.data for e in client.subscribe(1, 1, 3203)]
    assert got[:2] == [b"r0", b"r1"] and got[3000] == b"g0" and got[-1] == b"m2"


def test_await_keeps_the_loop_running_and_raises_failures(server):
    # A sealed log stream: the bound appender waits for its unseal (appender.delivery.timeout.ms)
    # while the awaiting coroutine sleeps; the ticker unseals it after ticking, so the future
    # cannot resolve before the loop has run other tasks.
    with varlog.Client(server.address) as c:
        server.seal(1, 1)

        async def main():
            with c.appender(1, log_stream=1) as app:
                t = Ticker()

                async def unseal_after_ticks():
                    await until(lambda: t.ticks >= 5)
                    server.unseal(1, 1)

                u = asyncio.ensure_future(unseal_after_ticks())
                meta = await app.append(b"after the unseal")
                t.stop()
                await u
                return meta

        assert run(main()).glsn == 1

    with varlog.Client(server.address, append_retries=0) as c:
        server.seal(1, 2)

        async def failing():
            with c.appender(1, log_stream=2) as app:
                with pytest.raises(varlog.NotAppended) as ei:
                    await app.append(b"x")
                return ei.value

        assert run(failing()).name == "ERR_SEALED"


def test_async_for_reads_a_range(client):
    client.append_to(1, 1, [b"a", b"b"])
    client.append_to(1, 2, [b"c"])

    async def main():
        sub = client.subscribe(1, 1, 4)
        got = [e async for e in sub]
        with pytest.raises(StopAsyncIteration):
            await sub.__anext__()  # after the end, again
        return sub, got

    sub, got = run(main())
    assert [(e.glsn, e.data) for e in got] == [(1, b"a"), (2, b"b"), (3, b"c")]
    assert sub.ended
    sub.close()


def test_async_for_waits_off_the_loop(client):
    async def main():
        sub = client.subscribe(1, 1)
        t = Ticker()
        task = asyncio.ensure_future(sub.__anext__())
        # the read waits on the subscription's reader thread, and the loop goes on ticking
        await until(lambda: sub._aio is not None and sub._aio.pending is not None)
        ticks = t.ticks
        await until(lambda: t.ticks >= ticks + 10)
        assert not task.done()
        client.append(1, b"late")
        e = await task
        t.stop()
        sub.close()
        return e

    e = run(main())
    assert e.data == b"late" and e.glsn == 1


def test_cancelled_anext_loses_nothing(client):
    async def main():
        sub = client.subscribe(1, 1)
        task = asyncio.ensure_future(sub.__anext__())
        await until(lambda: sub._aio is not None and sub._aio.pending is not None)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the read goes on without anyone awaiting it; its entry is kept
        client.append(1, [b"x1", b"x2"])
        await until(lambda: sub._aio.pending.done())
        first = await sub.__anext__()
        second = await sub.__anext__()

        # cancelled again while waiting, then one reader at a time
        task = asyncio.ensure_future(sub.__anext__())
        await until(lambda: sub._aio.pending is not None and sub._aio.awaiting)
        with pytest.raises(RuntimeError, match="one reader at a time"):
            await sub.__anext__()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        client.append(1, b"x3")
        third = await sub.__anext__()  # the cancelled task's read
        stats = sub.stats()
        sub.close()
        return [first, second, third], stats

    got, stats = run(main())
    assert [(e.glsn, e.data) for e in got] == [(1, b"x1"), (2, b"x2"), (3, b"x3")]
    assert stats["entries"] == 3  # nothing read twice, nothing skipped


def test_close_from_elsewhere_ends_async_for(client):
    client.append(1, b"one")

    async def main():
        sub = client.subscribe(1, 1)
        got = []

        async def consume():
            async for e in sub:
                got.append(e.data)
            return "ended"

        task = asyncio.ensure_future(consume())
        await until(lambda: got and sub._aio is not None and sub._aio.pending is not None)
        closer = threading.Thread(target=sub.close)  # another thread closes it
        closer.start()
        result = await task
        closer.join(5)
        return sub, got, result

    sub, got, result = run(main())
    assert result == "ended" and got == [b"one"] and sub.closed
    # the reader thread was ended by the close
    assert wait_for(lambda: not any(t.name == "varlog-py-aio" for t in threading.enumerate()))


def test_client_close_ends_async_for_and_failures_raise(server):
    c = varlog.Client(server.address)

    async def main():
        sub = c.subscribe(1, 1)
        task = asyncio.ensure_future(sub.__anext__())
        await until(lambda: sub._aio is not None and sub._aio.pending is not None)
        c.close()  # on the loop: closes the subscription
        with pytest.raises(StopAsyncIteration):
            await task
        return sub

    sub = run(main())
    assert sub.closed

    with varlog.Client(server.address) as c2:
        c2.append(1, [b"a", b"b", b"c"])
        c2.trim(1, 2)

        async def trimmed():
            while True:  # the node trims asynchronously (bounded by the test's timeout)
                with c2.subscribe(1, 1, 4) as s:
                    async for _ in s:
                        pass
                await asyncio.sleep(0.01)

        with pytest.raises(varlog.Trimmed):
            run(trimmed())
