"""Tell running processes that the configuration changed (after ``lockgate-admin import``).

The console announces its writes on the shared-state bus; a write made by this tool must be
announced the same way or the processes keep serving their cached catalog, settings and users.  Only
a fleet has a bus (``--redis``); a single process without Redis reloads on restart.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import react

from gateway.invalidation import CATALOG, USERS, Invalidation
from gateway.settings.store import BUS_CHANNEL
from tap.state_factory import open_state


def announce(redis_url: str, settings_changed: bool) -> None:
    """Publish the catalog (and settings) change on the fleet's bus; blocks until sent.

    Runs the reactor once (this is a one-shot command); raises SystemExit when it fails.
    """

    async def publish(state: Any) -> None:
        await Invalidation(state).announce(CATALOG)
        if settings_changed:
            await state.publish(BUS_CHANNEL, b"changed")

    _run(redis_url, publish)


def announce_user(redis_url: str, user_id: int) -> None:
    """Publish that a user changed (``reset-password`` bumped their token version), so every
    process drops its cached copy and refuses the old tokens at once; blocks until sent."""

    async def publish(state: Any) -> None:
        await Invalidation(state).announce(USERS, str(user_id).encode())

    _run(redis_url, publish)


def _run(redis_url: str, work: Callable[[Any], Coroutine[Any, Any, None]]) -> None:
    async def publish(reactor: Any) -> None:
        state = open_state(reactor, redis_url)
        await state.start()
        try:
            await work(state)
        finally:
            await state.stop()

    def main(reactor: Any) -> Deferred[None]:
        return ensureDeferred(publish(reactor))

    try:
        react(main, [])
    except SystemExit as done:
        if done.code:
            raise
