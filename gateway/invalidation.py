"""Cache invalidation across nodes: reload here first, then tell the other nodes.

A console write must be visible to the next request on this node ("a test changes a price and
sees it at once"), so ``announce`` awaits the local reloaders before publishing.  Messages carry
the sender's node id so a node ignores its own echo coming back from Redis.

The bus forgets what it could not deliver: a message published while Redis is away, or while a
node's subscriber is reconnecting, never arrives.  So when the shared state comes back every
node reloads everything it caches, once (its own reconnect is the signal), and a node whose own
publish failed publishes it again then (other nodes may never have lost Redis).  The write
itself is committed and applied here, so a failed publish does not fail the write.
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

#: what reloaders receive when they must drop everything (after the bus was lost)
EVERYTHING = b"*"

Reloader = Callable[[bytes], Coroutine[Any, Any, None]]


class Invalidation:
    def __init__(self, state: SharedState) -> None:
        self._state = state
        self._node = secrets.token_hex(8).encode()
        self._reloaders: dict[str, list[Reloader]] = defaultdict(list)
        self._unsubscribes: list[Callable[[], None]] = [state.on_recovered(self._recovered)]
        #: announcements whose publish failed, in order, sent again once the state is back
        self._unsent: dict[tuple[str, bytes], None] = {}

    def on(self, channel: str, reloader: Reloader) -> None:
        """Run ``reloader(detail)`` whenever ``channel`` is announced, here or on another node,
        and ``reloader(EVERYTHING)`` after the shared state was lost and came back."""
        if channel not in self._reloaders:
            self._unsubscribes.append(
                self._state.subscribe(channel, lambda message: self._remote(channel, message)))
        self._reloaders[channel].append(reloader)

    async def announce(self, channel: str, detail: bytes = b"*") -> None:
        for reloader in list(self._reloaders.get(channel, ())):
            await reloader(detail)
        await self._publish(channel, detail)

    async def _publish(self, channel: str, detail: bytes) -> None:
        try:
            await self._state.publish(channel, self._node + b"|" + detail)
        except Exception as exc:
            log.warn("could not tell the other nodes about {channel} ({error}); "
                     "they will hear once the shared state is back",
                     channel=channel, error=exc)
            self._unsent[(channel, detail)] = None

    def _remote(self, channel: str, message: bytes) -> None:
        node, _, detail = message.partition(b"|")
        if node == self._node:
            return
        self._reload(channel, detail)

    def _reload(self, channel: str, detail: bytes) -> None:
        for reloader in list(self._reloaders.get(channel, ())):
            ensureDeferred(reloader(detail)).addErrback(
                lambda f: log.failure("reload of {channel} failed", f, channel=channel))

    def _recovered(self) -> None:
        for channel in list(self._reloaders):
            self._reload(channel, EVERYTHING)
        unsent, self._unsent = list(self._unsent), {}
        for channel, detail in unsent:
            ensureDeferred(self._publish(channel, detail))

    def close(self) -> None:
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes.clear()
