"""Login JWTs: HS256 with ``id``, ``is_admin``, ``iat``, ``exp`` and the token version ``tv``.

``tv`` must equal the user's current ``token_version``; bumping it (password change, disable,
demotion, deletion) revokes every older token at once (console contract §0, weakness 12).

Verifying a token with PyJWT costs ~0.1-0.8 ms of CPU (parsing, key preparation, the HMAC) and
every console request and every JWT call on ``/v1`` pays it.  What that check proves about one
exact token string never changes (the key is fixed for the life of the codec), so the claims of
strings that passed are remembered in a bounded LRU; expiry is NOT part of what is remembered:
it is compared with the clock on every use, cached or not.  A flood of distinct tokens only
evicts older entries (``max_cached``), it cannot grow memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import jwt
from twisted.internet.interfaces import IReactorTime

ALGORITHM = "HS256"

#: verified token strings remembered by default (each entry is ~0.5 KiB with its key string)
DEFAULT_CACHED_TOKENS = 10_000


class InvalidToken(Exception):
    """Signature, expiry or claims are wrong."""


@dataclass(frozen=True)
class Claims:
    user_id: int
    token_version: int
    is_admin: bool


class TokenCodec:
    def __init__(self, key: bytes, clock: IReactorTime,
                 max_cached: int = DEFAULT_CACHED_TOKENS) -> None:
        self._key = key
        self._clock = clock
        self._max_cached = max_cached
        #: token string -> (exp, claims) of tokens whose signature and claims were verified
        self._verified: OrderedDict[str, tuple[int, Claims]] = OrderedDict()

    @property
    def cached(self) -> int:
        """How many verified tokens are remembered (never more than ``max_cached``)."""
        return len(self._verified)

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
        entry = self._verified.get(token)
        if entry is None:
            entry = self._verify(token)
            self._verified[token] = entry
            if len(self._verified) > self._max_cached:
                self._verified.popitem(last=False)
        else:
            self._verified.move_to_end(token)
        exp, claims = entry
        # expiry is checked against the injected clock (tests drive it), on every use
        if exp <= self._clock.seconds():
            self._verified.pop(token, None)
            raise InvalidToken("expired")
        return claims

    def _verify(self, token: str) -> tuple[int, Claims]:
        try:
            claims = jwt.decode(
                token, self._key, algorithms=[ALGORITHM],
                options={"require": ["exp", "id", "tv"], "verify_exp": False, "verify_iat": False,
                         "verify_nbf": False},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from None
        exp, user_id, version = claims.get("exp"), claims.get("id"), claims.get("tv")
        if isinstance(exp, bool) or not isinstance(exp, int):
            raise InvalidToken("bad exp")
        if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id <= 0:
            raise InvalidToken("bad id")
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidToken("bad tv")
        return exp, Claims(user_id=user_id, token_version=version,
                           is_admin=bool(claims.get("is_admin")))
