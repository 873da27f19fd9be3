"""``run_call``: a /v1 handler's coroutine driven step by step, without a Deferred for the task.

Why: ``ensureDeferred`` wraps every call in a Deferred and resumes it through Twisted's generic
``_inlineCallbacks`` (cancellation support, a status object, a result Deferred whose callbacks
then run) -- about 3 µs per call here, near 1 % of a /v1 request (issue 22).  Nobody cancels
or awaits a handler's task: the drain only counts running calls (``CallsInFlight``) and a crash
is only logged.  So this does just that: each Deferred the coroutine awaits resumes it with its
result (or throws its failure into it), every step runs in the call's own copy of the context
as under ``ensureDeferred`` (a call's ``REQUEST_ID`` never leaks into the reactor's), the end
is counted once, and an exception that escapes the handler is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextvars import Context, copy_context
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

log = Logger()


class _CallTask:
    """One running handler: its coroutine, its context and what to call once it ends."""

    __slots__ = ("_context", "_coro", "_ended")

    def __init__(self, coro: Coroutine[Any, Any, Any], ended: Callable[[], None]) -> None:
        self._coro = coro
        self._context: Context = copy_context()
        self._ended = ended

    def send(self, value: Any) -> None:
        self._resume(self._coro.send, value)

    def throw(self, failure: Failure) -> None:
        self._resume(failure.throwExceptionIntoGenerator, self._coro)

    def _resume(self, step: Callable[[Any], Any], argument: Any) -> None:
        while True:
            try:
                awaited = self._context.run(step, argument)
            except StopIteration:
                self._ended()
                return
            except BaseException:
                log.failure("gateway handler crashed")
                self._ended()
                return
            if isinstance(awaited, Deferred):
                # ``await`` yields only a Deferred without its result yet (or paused): it
                # resumes this task when it fires
                awaited.addCallbacks(self.send, self.throw)
                return
            # anything else awaited is handed back, as ``ensureDeferred`` does
            step, argument = self._coro.send, awaited


def run_call(coro: Coroutine[Any, Any, Any], started: Callable[[], None],
             ended: Callable[[], None]) -> None:
    """Run ``coro`` to its end: ``started()`` now, ``ended()`` once when it returns or
    raises (the exception is logged)."""
    started()
    _CallTask(coro, ended).send(None)
