"""Random ids and device tokens in the contract's formats (agents contract §0.1).

Ids are ``<prefix>-`` + base32(10 random bytes), lower-cased, no padding (16 characters).
Tokens are ``wpc_`` + base32(32 random bytes) lower-cased (56 characters in all); only the
sha256 hex of the trimmed token is ever stored.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

DEVICE = "acd"
TASK = "act"
HOST = "ash"
SANDBOX = "acs"
CHARGE = "asc"
TOKEN_PREFIX = "wpc_"


def _base32(raw: bytes) -> str:
    return base64.b32encode(raw).decode("ascii").rstrip("=").lower()


def new_id(prefix: str) -> str:
    return f"{prefix}-{_base32(secrets.token_bytes(10))}"


def new_token() -> str:
    return TOKEN_PREFIX + _base32(secrets.token_bytes(32))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.strip().encode("utf-8")).hexdigest()
