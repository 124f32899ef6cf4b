"""Varlog for Python: a binding of libvarlog, the C client of the Varlog distributed log.

See python/README.md for the API, the outcome rules and the threading rules.
"""

import atexit
import os

from .errors import (Closed, ClosedNotAppended, InvalidArgument, MaybeAppended, NotAppended, QueueFull, TimedOut,
                     Trimmed, UnknownLogStream, UnknownTopic, VarlogError)
from ._future import AppendFuture
from ._varlog import (GLSN_MAX, Admin, Appender, Client, Entry, EntryMeta, Server,
                      Subscription, SubscriptionHealth, err_name, version)
from . import _varlog

__all__ = [
    "Admin", "AppendFuture", "Appender", "Client", "Closed", "ClosedNotAppended", "Entry", "EntryMeta", "GLSN_MAX",
    "InvalidArgument", "MaybeAppended", "NotAppended", "QueueFull", "Server", "Subscription", "SubscriptionHealth",
    "TimedOut", "Trimmed", "UnknownLogStream", "UnknownTopic", "VarlogError", "err_name",
    "version",
]

# Before the interpreter finalizes: close every client (their appenders and subscriptions
# first), so that no thread of the library calls into a finalized interpreter.
atexit.register(_varlog._shutdown)
# In the child of os.fork, the parent's clients, appenders, subscriptions, admin handles and
# servers look closed and are left alone: their threads were not copied, so closing them (the
# atexit hook above, a with block) would wait for ever.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_varlog._after_fork_child)
