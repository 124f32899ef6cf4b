"""The future an Appender's append returns."""

import concurrent.futures


class AppendFuture(concurrent.futures.Future):
    """A concurrent.futures.Future resolved exactly once by the appender: with the record's
    EntryMeta when it was stored, or with NotAppended / MaybeAppended (a VarlogError). It
    cannot be cancelled: once queued, a record's fate is the cluster's, so cancel() returns
    False and changes nothing."""

    def cancel(self) -> bool:
        return False
