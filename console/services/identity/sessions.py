"""Who is calling a console route: the login JWT in ``Authorization: Bearer`` -- nothing else.

API keys are refused here (contract weakness 2) and tokens are never read from the query string
(weakness 11).  The user row is read on every request so that disabling, demotion and token
revocation take effect at once.
"""

from __future__ import annotations

from typing import Any

from twisted.web.iweb import IRequest

from console.http import ApiError
from gateway.session_tokens import InvalidToken, TokenCodec
from gateway.store import users as user_store
from gateway.store.pool import DBRunner


def bearer_token(request: IRequest) -> str | None:
    header = request.getHeader(b"authorization")
    if not header:
        return None
    parts = header.decode("latin-1").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


class Sessions:
    def __init__(self, db: DBRunner, tokens: TokenCodec) -> None:
        self._db = db
        self._tokens = tokens

    async def user(self, request: IRequest) -> dict[str, Any]:
        token = bearer_token(request)
        if token is None:
            raise ApiError(401, "Authorization is required")
        if token.startswith("sk-"):
            raise ApiError(401, "API keys are not accepted on console routes; sign in instead")
        try:
            claims = self._tokens.decode(token)
        except InvalidToken:
            raise ApiError(401, "Invalid session") from None
        user = await self._db.transaction(user_store.get_user, claims.user_id)
        if user is None:
            raise ApiError(401, "User not found")
        if user["token_version"] != claims.token_version:
            raise ApiError(401, "Invalid session")
        if not user["enabled"]:
            raise ApiError(403, "User is disabled", type="user_disabled")
        return user

    async def admin(self, request: IRequest) -> dict[str, Any]:
        user = await self.user(request)
        if not user["is_admin"]:
            raise ApiError(403, "Admin access required")
        return user
