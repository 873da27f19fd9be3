"""A settled request's ``created_at`` in SQLite's text form and its rollup hour, cheaply.

Why: every settled request's usage-log row needs its time as the text ``UTCDateTime`` stores
on SQLite (``driver_sql.timestamp_param``) and its rollup hour (``usage_rollups.hour_of``),
converted on the reactor thread as the request ends.  ``isoformat`` with its ``timespec`` and
the ``timedelta`` arithmetic of ``hour_of`` were ~3-4 µs per request (issue 22).  Requests
ending within one second share everything but the microseconds, so this derives the
``YYYY-MM-DD HH:MM:SS`` part and the hour once per distinct second and appends the
microseconds -- the same text, character for character.

Only aware UTC times take the shortcut; any other time (another zone, naive) goes through
``timestamp_param`` / ``hour_of`` as before.  One instance per thread (it keeps the last
second it saw; the settler's lives on the reactor thread).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.store.driver_sql import timestamp_param
from gateway.store.usage_rollups import hour_of

_ZERO = timedelta(0)
_SECOND = timedelta(seconds=1)


class SecondTexts:
    """``sqlite_text_and_hour``, remembering the last whole second it converted."""

    __slots__ = ("_hour", "_prefix", "_second")

    def __init__(self) -> None:
        #: the last whole UTC second converted (aware), its text and its rollup hour
        self._second: datetime | None = None
        self._prefix = ""
        self._hour = 0

    def sqlite_text_and_hour(self, moment: datetime) -> tuple[str, int]:
        """``(timestamp_param(moment, "sqlite"), hour_of(moment))``."""
        if moment.tzinfo is not UTC:
            return timestamp_param(moment, "sqlite"), hour_of(moment)
        second = self._second
        if second is None or not _ZERO <= moment - second < _SECOND:
            second = moment.replace(microsecond=0)
            # a whole second's isoformat leaves the fraction out: "YYYY-MM-DD HH:MM:SS"
            self._prefix = second.replace(tzinfo=None).isoformat(" ")
            self._hour = hour_of(second)
            self._second = second
        return f"{self._prefix}.{moment.microsecond:06d}", self._hour
