"""``run_call`` drives a handler's coroutine as ``ensureDeferred`` would, without its Deferred.

Each test runs the same coroutine both ways where the difference could show: the values and
failures each await gets, the context a step sees, when the end is counted, and what is logged
when a handler raises.
"""

from __future__ import annotations

import contextvars
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.trial.unittest import TestCase

from gateway.v1.call_task import run_call
from gateway.v1.calls_in_flight import CallsInFlight

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="outside")


class Boom(Exception):
    pass


class Counter:
    def __init__(self) -> None:
        self.events: list[str] = []

    def started(self) -> None:
        self.events.append("started")

    def ended(self) -> None:
        self.events.append("ended")


class RunCallTests(TestCase):
    def test_awaits_resume_with_values_and_failures(self) -> None:
        first: Deferred[int] = Deferred()
        second: Deferred[int] = Deferred()
        seen: list[Any] = []

        async def inner() -> int:
            return await first + 1

        async def handler() -> None:
            seen.append(await succeed("at once"))  # a fired Deferred does not suspend
            seen.append(await inner())
            try:
                await second
            except Boom as error:
                seen.append(("caught", error.args, error.__traceback__ is not None))
            seen.append("done")

        counter = Counter()
        run_call(handler(), counter.started, counter.ended)
        assert seen == ["at once"] and counter.events == ["started"]
        first.callback(41)
        assert seen == ["at once", 42] and counter.events == ["started"]
        second.errback(Boom("no"))
        assert seen == ["at once", 42, ("caught", ("no",), True), "done"]
        assert counter.events == ["started", "ended"]

    def test_a_handler_that_never_waits_is_counted_and_ended_at_once(self) -> None:
        async def handler() -> None:
            return None

        counter = Counter()
        run_call(handler(), counter.started, counter.ended)
        assert counter.events == ["started", "ended"]

    def test_an_escaping_exception_is_logged_and_ends_the_task_once(self) -> None:
        later: Deferred[None] = Deferred()

        async def handler() -> None:
            await later
            raise Boom("crashed")

        counter = Counter()
        run_call(handler(), counter.started, counter.ended)
        later.callback(None)
        assert counter.events == ["started", "ended"]
        assert len(self.flushLoggedErrors(Boom)) == 1

    def test_each_call_has_its_own_context_as_under_ensure_deferred(self) -> None:
        for drive in ("ensureDeferred", "run_call"):
            gate: Deferred[None] = Deferred()
            seen: list[str] = []

            async def handler(name: str, gate: Deferred[None] = gate,
                              seen: list[str] = seen) -> None:
                VAR.set(name)
                await gate
                seen.append(VAR.get())

            if drive == "ensureDeferred":
                ensureDeferred(handler("a"))
            else:
                run_call(handler("a"), lambda: None, lambda: None)
            # the step that set it ran in the call's own context: not the caller's
            assert VAR.get() == "outside", drive
            VAR.set("reactor")
            gate.callback(None)
            assert seen == ["a"], drive
            assert VAR.get() == "reactor", drive
            VAR.set("outside")

    def test_the_drain_counts_running_calls(self) -> None:
        calls = CallsInFlight()
        gate: Deferred[None] = Deferred()

        async def handler() -> None:
            await gate

        run_call(handler(), calls.started, calls.ended)
        assert calls.count == 1
        idle = calls.idle()
        assert not idle.called
        gate.callback(None)
        assert calls.count == 0 and idle.called
