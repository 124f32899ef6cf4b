"""Exceptions of the varlog package.

Every failure the library reports is raised as a subclass of :class:`VarlogError` that
carries the library's error code, its name (``"ERR_TIMED_OUT"``, ``"ERR_RPC_UNAVAILABLE"``,
...) and ``varlog_last_error()``'s text (what failed and where). Appends add ``outcome``:
``"NOT_APPENDED"`` (certainly not stored: safe to append again) or ``"MAYBE_APPENDED"``
(perhaps stored: appending again may store the records twice).
"""

from typing import Optional


class VarlogError(Exception):
    """A failure reported by libvarlog.

    Attributes: ``code`` (the C ``varlog_err_t``), ``name`` (its enumerator without the
    ``VARLOG_`` prefix), ``text`` (what failed and where), ``outcome`` (for appends:
    ``"NOT_APPENDED"`` or ``"MAYBE_APPENDED"``; ``None`` otherwise) and ``retriable``
    (``varlog_err_is_retriable``: the same call may succeed later unchanged).
    """

    def __init__(self, text: str, code: int = 0, name: str = "", outcome: Optional[str] = None,
                 retriable: bool = False) -> None:
        super().__init__(f"{name}: {text}" if name else text)
        self.text = text
        self.code = code
        self.name = name
        self.outcome = outcome
        self.retriable = retriable


class NotAppended(VarlogError):
    """An append whose records were certainly not stored: appending them again is safe."""


class MaybeAppended(VarlogError):
    """An append whose records may have been stored (a request was sent and its answer was
    lost): appending them again may store them twice."""


class QueueFull(NotAppended):
    """The appender's queue stayed full for the append's timeout; nothing was queued."""


class InvalidArgument(VarlogError, ValueError):
    """The library refused an argument (ERR_INVALID_ARG); nothing was done or sent."""


class Closed(VarlogError):
    """The client, appender or subscription is closed or closing (ERR_CLOSED)."""


class TimedOut(VarlogError, TimeoutError):
    """The call's timeout passed before the operation finished (ERR_TIMED_OUT)."""


class UnknownTopic(VarlogError, LookupError):
    """The cluster's metadata has no such topic (ERR_UNKNOWN_TOPIC)."""


class UnknownLogStream(VarlogError, LookupError):
    """The topic has no such log stream (ERR_UNKNOWN_LOG_STREAM)."""


class Trimmed(VarlogError):
    """A subscription's range lies in a trimmed prefix (ERR_TRIMMED)."""


class ClosedNotAppended(Closed, NotAppended):
    """An append refused or ended because its appender or client closed before the records
    were sent (ERR_CLOSED with outcome NOT_APPENDED): both Closed and NotAppended."""
