"""The one error the assistant stores raise: a contract status and message (plus extras)."""

from __future__ import annotations

from typing import Any


class Refused(Exception):
    """A refused read or write; the transaction it was raised in rolls back."""

    def __init__(self, status: int, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra or {}


def invalid(message: str) -> Refused:
    return Refused(400, message)


def missing(message: str) -> Refused:
    return Refused(404, message)


def conflict(message: str) -> Refused:
    return Refused(409, message)
