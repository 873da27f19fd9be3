"""Login JWTs: HS256 with ``id``, ``is_admin``, ``iat``, ``exp`` and the token version ``tv``.

``tv`` must equal the user's current ``token_version``; bumping it (password change, disable,
demotion, deletion) revokes every older token at once (console contract §0, weakness 12).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jwt
from twisted.internet.interfaces import IReactorTime

ALGORITHM = "HS256"


class InvalidToken(Exception):
    """Signature, expiry or claims are wrong."""


@dataclass(frozen=True)
class Claims:
    user_id: int
    token_version: int
    is_admin: bool


class TokenCodec:
    def __init__(self, key: bytes, clock: IReactorTime) -> None:
        self._key = key
        self._clock = clock

    def issue(self, user: dict[str, Any], lifetime_seconds: int) -> str:
        now = int(self._clock.seconds())
        claims = {
            "id": user["id"],
            "is_admin": bool(user["is_admin"]),
            "iat": now,
            "exp": now + lifetime_seconds,
            "tv": user["token_version"],
        }
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def decode(self, token: str) -> Claims:
        try:
            claims = jwt.decode(
                token, self._key, algorithms=[ALGORITHM],
                options={"require": ["exp", "id", "tv"], "verify_exp": False, "verify_iat": False,
                         "verify_nbf": False},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from None
        exp, user_id, version = claims.get("exp"), claims.get("id"), claims.get("tv")
        # expiry is checked against the injected clock (tests drive it)
        if not isinstance(exp, int) or exp <= self._clock.seconds():
            raise InvalidToken("expired")
        if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id <= 0:
            raise InvalidToken("bad id")
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidToken("bad tv")
        return Claims(user_id=user_id, token_version=version,
                      is_admin=bool(claims.get("is_admin")))
