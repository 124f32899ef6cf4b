"""The future an Appender's append returns: varlog.AppendFuture, a concurrent.futures.Future
subclass implemented in the extension (python/src/future.c)."""

from ._varlog import AppendFuture

__all__ = ["AppendFuture"]
