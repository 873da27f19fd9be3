"""Who is calling a console route: the login JWT in ``Authorization: Bearer`` -- nothing else.

API keys are refused here (contract weakness 2) and tokens are never read from the query string
(weakness 11).

Every console request authenticates, so this check costs no database transaction: the token's
signature check is cached by the codec and the user (enabled, role, token version) comes from
the gateway's in-memory ``UserCache`` -- the one the /v1 path reads.  Revocation stays
immediate: every write that bumps the token version, disables, demotes or deletes a user
announces ``USERS``, which drops the cached user on this node before the write's response and
on every other node through the bus, so the next request reads the row again and sees the new
version.  ``user`` therefore returns only what authorisation needs (``SessionUser``); a route
that shows or changes the row itself (profile, balance, password) asks ``user_row`` (or
``user_with_relations``), which reads the row fresh -- its own read -- and checks it too.
"""

from __future__ import annotations

from typing import Any, TypedDict

from twisted.web.iweb import IRequest

from console.http import ApiError
from gateway.session_tokens import Claims, InvalidToken, TokenCodec
from gateway.store import users as user_store
from gateway.store.gateway_users import GatewayUser
from gateway.store.pool import DBRunner
from gateway.user_cache import UserCache


class SessionUser(TypedDict):
    """The signed-in user as far as authorisation goes (read from memory, not the database)."""

    id: int
    is_admin: bool
    enabled: bool
    token_version: int
    group_id: int


def bearer_token(request: IRequest) -> str | None:
    header = request.getHeader(b"authorization")
    if not header:
        return None
    parts = header.decode("latin-1").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


class Sessions:
    def __init__(self, db: DBRunner, tokens: TokenCodec, users: UserCache) -> None:
        self._db = db
        self._tokens = tokens
        #: shared with the /v1 path (``GatewayContext.users``): one cache, one invalidation
        self.users = users

    def _claims(self, request: IRequest) -> Claims:
        token = bearer_token(request)
        if token is None:
            raise ApiError(401, "Authorization is required")
        if token.startswith("sk-"):
            raise ApiError(401, "API keys are not accepted on console routes; sign in instead")
        try:
            return self._tokens.decode(token)
        except InvalidToken:
            raise ApiError(401, "Invalid session") from None

    async def user(self, request: IRequest) -> SessionUser:
        claims = self._claims(request)
        user = await self.users.get(claims.user_id)
        _check(claims, user)
        assert user is not None
        return SessionUser(id=user.id, is_admin=user.is_admin, enabled=user.enabled,
                           token_version=user.token_version, group_id=user.primary_group_id)

    async def admin(self, request: IRequest) -> SessionUser:
        user = await self.user(request)
        if not user["is_admin"]:
            raise ApiError(403, "Admin access required")
        return user

    async def user_row(self, request: IRequest) -> dict[str, Any]:
        """The caller's whole ``users`` row, read now (for routes that show or change it)."""
        claims = self._claims(request)
        row = await self._db.transaction(user_store.get_user, claims.user_id)
        _check(claims, row)
        assert row is not None
        return row

    async def user_with_relations(
            self, request: IRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        """``user_row`` and the row's group, memberships and inviter, in one transaction."""
        claims = self._claims(request)
        row, relations = await self._db.transaction(_row_and_relations, claims.user_id)
        _check(claims, row)
        assert row is not None
        return row, relations


def _row_and_relations(conn: Any, user_id: int) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    row = user_store.get_user(conn, user_id)
    return row, (user_store.user_relations(conn, row) if row is not None else {})


def _check(claims: Claims, user: GatewayUser | dict[str, Any] | None) -> None:
    """The same answers whether the user came from the cache or from the row."""
    if user is None:
        raise ApiError(401, "User not found")
    fields = user if isinstance(user, dict) else vars(user)
    if fields["token_version"] != claims.token_version:
        raise ApiError(401, "Invalid session")
    if not fields["enabled"]:
        raise ApiError(403, "User is disabled", type="user_disabled")
