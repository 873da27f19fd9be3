"""The ``Date`` header's text, made once per second rather than once per response.

twisted.web formats ``Date`` for every request (``datetimeToString()``: a ``gmtime`` and a
``%``-format), about 1.5 % of a /v1 request's samples at full load (issue 22).  The text only
changes when the wall clock's second does, so it is kept with the second it was made for and
made again when the second moves on: the same bytes ``datetimeToString()`` gives at that time.
"""

from __future__ import annotations

import time

from twisted.web.http import datetimeToString


class HttpDate:
    """``now()``: ``datetimeToString()`` of the current second, reused within that second."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = b""

    def now(self, seconds: float | None = None) -> bytes:
        """The header text for ``seconds`` since the epoch (default: the wall clock now)."""
        second = int(time.time() if seconds is None else seconds)
        if second != self._second:
            self._text = datetimeToString(second)
            self._second = second
        return self._text


#: the process's one cache (the reactor thread writes every response head)
HTTP_DATE = HttpDate()
