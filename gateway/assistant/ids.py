"""Random record ids of the assistant (agents contract §0.1).

``<prefix>-<suffix>``: 10 random bytes in lower-case RFC 4648 base32 without padding, so every
suffix is 16 characters.  MCP server ids are ``mcp-<base36 of unix nanoseconds + index>``.
"""

from __future__ import annotations

import base64
import os

SESSION = "acs"
MESSAGE = "acm"
RUN = "acr"
AGENT_TASK = "agt"

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def random_id(prefix: str) -> str:
    suffix = base64.b32encode(os.urandom(10)).decode("ascii").rstrip("=").lower()
    return f"{prefix}-{suffix}"


def base36(number: int) -> str:
    if number <= 0:
        return "0"
    digits: list[str] = []
    while number:
        number, digit = divmod(number, 36)
        digits.append(_DIGITS[digit])
    return "".join(reversed(digits))


def mcp_server_id(unix_nanos: int, index: int) -> str:
    """The id a server item gets when the caller sent none (index = its place in the list)."""
    return f"mcp-{base36(unix_nanos + index)}"
