"""What the client and its two transports (WebSocket, long-poll) say to each other.

A transport reports one ``LinkOutcome`` when it ends; the client decides from its ``kind``
whether to stop (token revoked, superseded), fall back to long-poll, or reconnect after a
back-off. While up, a transport is a ``Link`` the client sends output and results through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# How a link ended.
CLOSED = "closed"  # it was up and went away: reconnect
UNAVAILABLE = "unavailable"  # could not get through (refused, 5xx, timeout): reconnect later
UNSUPPORTED = "unsupported"  # the server has no WebSocket endpoint: fall back to long-poll
REVOKED = "revoked"  # 401 / close 4401: the token is not (or no longer) valid: stop
SUPERSEDED = "superseded"  # close 4409: another connection of this device took over: stop


@dataclass(frozen=True)
class LinkOutcome:
    kind: str
    detail: str = ""
    was_up: bool = False


class Link(Protocol):
    """An established transport."""

    def send_output(self, task_id: str, seq: int, stream: str, data: str) -> None: ...

    def send_result(self, task_id: str, fields: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class LinkOwner(Protocol):
    """The client, as the transports see it."""

    def link_up(self, link: Link) -> None: ...

    def task_received(self, task: Any) -> None: ...

    def task_cancelled(self, task_id: str, reason: str) -> None: ...

    def result_acked(self, task_id: str) -> None: ...

    def has_slot(self) -> bool: ...

    def hello_fields(self) -> dict[str, Any]: ...
