"""asyncio support of the binding: `await` on an AppendFuture and `async for` over a
Subscription. The extension's slots (AppendFuture.__await__, Subscription.__anext__) call
in here on first use, so that `import varlog` does not import asyncio.

A subscription's async iterator never waits on the event loop. It first takes an entry the
library already holds, on the loop without waiting (Subscription.next(timeout=0): no hand-off
while entries stream in); when there is none, the wait runs on the subscription's own reader
thread ("varlog-py-aio", a daemon thread started on the first such wait, ended by close), and
the awaiting coroutine is woken through the loop's call_soon_threadsafe. A read that thread
began belongs to the subscription, not to the awaiting task: when the task is cancelled the
read goes on, and its entry (or failure) is what the next __anext__ returns, so cancelling
loses nothing and delivers nothing twice.
"""

import asyncio
import queue
import threading
import concurrent.futures

from .errors import Closed


def _resolved(fut):
    """What `await` iterates for a resolved future: its outcome, without a trip through the
    loop."""
    return fut.result()
    yield  # a generator: the return above is its StopIteration value


def future_await(fut):
    """AppendFuture.__await__: a resolved future gives its outcome at once; a pending one is
    chained to the running loop (asyncio.wrap_future: its done-callback, on the thread that
    resolves it, wakes the awaiting task through call_soon_threadsafe)."""
    if fut.done():
        return _resolved(fut)
    return asyncio.wrap_future(fut, loop=asyncio.get_running_loop()).__await__()


class _Reader:
    """A subscription's reader thread and the read it has under way. Lives in the
    subscription's _aio slot; Subscription.close calls stop()."""

    def __init__(self):
        self.pending = None  # concurrent.futures.Future of the read begun and not yet taken
        self.awaiting = False  # a coroutine awaits it now
        self._requests = queue.SimpleQueue()
        self._thread = None

    def start_read(self, sub):
        fut = concurrent.futures.Future()
        if self._thread is None:
            self._thread = threading.Thread(target=_serve, args=(self._requests,),
                                            name="varlog-py-aio", daemon=True)
            self._thread.start()
        self._requests.put((sub, fut))
        self.pending = fut
        return fut

    def stop(self):
        """Ends the thread once its read returned (close wakes it within 0.1 s). Joins it
        unless called on it (the subscription dropped there)."""
        self._requests.put(None)
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join()


def _serve(requests):
    while True:
        req = requests.get()
        if req is None:
            return
        sub, fut = req
        del req
        if fut.set_running_or_notify_cancel():
            try:
                entry = sub.next()  # waits, GIL released; a close wakes it (Closed)
            except BaseException as e:  # noqa: B902 - handed to the awaiting coroutine
                fut.set_exception(e)
            else:
                fut.set_result(entry)
        del sub, fut  # not kept while idle: a subscription nobody holds can go


def _wake(loop, waiter):
    def done(_fut):
        try:
            loop.call_soon_threadsafe(_set_waiter, waiter)
        except RuntimeError:  # the loop is closed: nobody awaits any more
            pass
    return done


def _set_waiter(waiter):
    if not waiter.done():
        waiter.set_result(None)


def _closed_end(sub, exc):
    """A close (by the application, or its client's close) ends the async iteration as
    aiokafka and nats.py end theirs: StopAsyncIteration. Other failures are raised."""
    if isinstance(exc, Closed) and sub.closed:
        raise StopAsyncIteration from None
    raise exc


async def sub_anext(sub):
    """Subscription.__anext__."""
    r = sub._aio
    if r is None:
        r = sub._aio = _Reader()
    if r.awaiting:
        raise RuntimeError("another coroutine is already waiting for this subscription's next "
                           "entry (one reader at a time)")
    if r.pending is None:
        try:
            entry = sub.next(timeout=0)  # what the library holds: no wait, no hand-off
        except Closed as e:
            _closed_end(sub, e)
        if entry is not None:
            return entry
        if sub.ended:
            raise StopAsyncIteration
        r.start_read(sub)
    fut = r.pending
    if not fut.done():
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        fut.add_done_callback(_wake(loop, waiter))
        r.awaiting = True
        try:
            await waiter  # cancelled: the read goes on, its entry is the next __anext__'s
        finally:
            r.awaiting = False
    r.pending = None
    try:
        entry = fut.result()
    except Closed as e:
        _closed_end(sub, e)
    if entry is None:  # the end of the range
        raise StopAsyncIteration
    return entry


def is_coroutine_function(fn):
    """Whether a handler would return a coroutine instead of running (subscribe refuses it)."""
    import inspect
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))
