"""The request id of the call being served, for every log line that call causes.

Twisted runs each coroutine started with ``ensureDeferred`` in its own copy of the
``contextvars`` context, so a value set at the start of a gateway call is seen by every log
call made while that call runs -- in our modules and in Twisted's -- without passing the id
through every function.  ``tap.json_log`` adds it to each JSON log event.
"""

from __future__ import annotations

from contextvars import ContextVar

REQUEST_ID: ContextVar[str | None] = ContextVar("lockgate_request_id", default=None)
