"""Waiting on the real reactor for a condition that real sockets will make true."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import reactor
from twisted.internet.task import deferLater

STEP = 0.005


async def wait_for(predicate: Callable[[], Any], timeout: float = 5.0) -> None:
    """Let the real reactor run until ``predicate()`` holds; AssertionError after
    ``timeout`` seconds of steps."""
    waited = 0.0
    while not predicate():
        if waited > timeout:
            raise AssertionError("condition not reached")
        await deferLater(reactor, STEP, lambda: None)
        waited += STEP
