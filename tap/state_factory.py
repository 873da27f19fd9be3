"""Chooses the shared-state implementation: Redis when a URL is configured, else memory."""

from __future__ import annotations

from typing import Any

from gateway.state.memory import MemoryState
from gateway.state.protocol import SharedState


def open_state(reactor: Any, redis_url: str | None) -> SharedState:
    if not redis_url:
        return MemoryState(reactor)
    from gateway.state.redis import RedisState

    return RedisState.from_url(reactor, redis_url)
