"""The process secret: generated once, kept in a 0600 file, split into purpose-bound keys.

One file means one thing to back up; deriving separate keys (HMAC with a label) means a leaked
JWT key does not also reveal how API keys are hashed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class Secrets:
    """Keys derived from the process secret."""

    jwt_key: bytes
    api_key_hmac_key: bytes

    @classmethod
    def from_master(cls, master: bytes) -> Secrets:
        def derive(label: bytes) -> bytes:
            return hmac.new(master, label, hashlib.sha256).digest()

        return cls(jwt_key=derive(b"lockgate/jwt/v1"),
                   api_key_hmac_key=derive(b"lockgate/api-key/v1"))


def load_or_create(path: str) -> Secrets:
    """Read the secret file, creating it (mode 0600) with 64 random bytes if absent."""
    try:
        with open(path, "rb") as handle:
            master = handle.read().strip()
    except FileNotFoundError:
        master = secrets.token_hex(64).encode("ascii")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(master + b"\n")
    if len(master) < 32:
        raise ValueError(f"secret file {path} holds fewer than 32 bytes")
    return Secrets.from_master(master)
