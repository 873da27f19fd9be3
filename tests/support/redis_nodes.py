"""Test apps that are nodes of one fleet: every app a test opens shares one redis-server key
prefix (its bus and shared state), as the processes of a multi-node deployment do.

Mixed in before the app test case (``class T(SharedRedisNodes, AppTestCase)``), so a test's
second ``open_app()`` is a second node beside the first.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor

from gateway.state.redis import RedisState
from tests.support.redis_server import fresh_prefix, redis_server


class SharedRedisNodes:
    redis_url: str

    def open_app(self, **overrides: Any) -> Any:
        if not hasattr(self, "redis_url"):
            self.redis_url = redis_server().url(fresh_prefix())
        state = RedisState.from_url(reactor, self.redis_url)
        state.start()  # the app stops the state on close
        return super().open_app(state=state, **overrides)  # type: ignore[misc]
