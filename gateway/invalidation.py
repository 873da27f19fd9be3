"""Cache invalidation across nodes: reload here first, then tell the other nodes.

A console write must be visible to the next request on this node ("a test changes a price and
sees it at once"), so ``announce`` awaits the local reloaders before publishing.  Messages carry
the sender's node id so a node ignores its own echo coming back from Redis.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger

from gateway.state.protocol import SharedState

log = Logger()

CATALOG = "lockgate:catalog"
KEYS = "lockgate:keys"
USERS = "lockgate:users"

Reloader = Callable[[bytes], Coroutine[Any, Any, None]]


class Invalidation:
    def __init__(self, state: SharedState) -> None:
        self._state = state
        self._node = secrets.token_hex(8).encode()
        self._reloaders: dict[str, list[Reloader]] = defaultdict(list)
        self._unsubscribes: list[Callable[[], None]] = []

    def on(self, channel: str, reloader: Reloader) -> None:
        """Run ``reloader(detail)`` whenever ``channel`` is announced, here or on another node."""
        if channel not in self._reloaders:
            self._unsubscribes.append(
                self._state.subscribe(channel, lambda message: self._remote(channel, message)))
        self._reloaders[channel].append(reloader)

    async def announce(self, channel: str, detail: bytes = b"*") -> None:
        for reloader in list(self._reloaders.get(channel, ())):
            await reloader(detail)
        await self._state.publish(channel, self._node + b"|" + detail)

    def _remote(self, channel: str, message: bytes) -> None:
        node, _, detail = message.partition(b"|")
        if node == self._node:
            return
        for reloader in list(self._reloaders.get(channel, ())):
            ensureDeferred(reloader(detail)).addErrback(
                lambda f: log.failure("reload of {channel} failed", f, channel=channel))

    def close(self) -> None:
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes.clear()
