"""The caller's API keys: list, create, update, rotate, reset usage, delete (contract §4.9).

Every query is scoped to the signed-in user, so another user's key id answers exactly like a
missing one (404 ``API key not found``).  After each write the key's hash is announced on KEYS
so every node's key cache drops it at once: a disabled, rotated or deleted key stops working on
the very next request.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.catalog.key_views import key_view, parse_key_input, with_secret
from console.services.identity.sessions import SessionUser
from console.validation import MISSING, Body
from gateway.invalidation import KEYS
from gateway.keys import display_prefix, generate_key
from gateway.store import api_keys as key_store

NOT_FOUND = "API key not found"
LEGACY_NAME = "Default key"


class KeyActions:
    """The key operations shared by the REST routes and the legacy rotate route."""

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def dropped(self, key_hash: str) -> None:
        await self.ctx.invalidation.announce(KEYS, key_hash.encode("ascii"))

    async def create(self, user: SessionUser, changes: dict[str, Any]) -> dict[str, Any]:
        plaintext = generate_key()
        key_hash = self.ctx.key_hasher.hash(plaintext)
        try:
            row = await self.ctx.db.transaction(
                key_store.create, user_id=user["id"], key_hash=key_hash,
                key_prefix=display_prefix(plaintext), now=self.ctx.now(), **changes)
        except key_store.KeyInputError as exc:
            raise ApiError(400, exc.message, field=exc.field) from None
        await self.dropped(key_hash)
        return with_secret(row, plaintext)

    async def rotate(self, user: SessionUser, key_id: int) -> dict[str, Any]:
        plaintext = generate_key()
        result = await self.ctx.db.transaction(
            key_store.rotate, user["id"], key_id, self.ctx.key_hasher.hash(plaintext),
            display_prefix(plaintext), self.ctx.now())
        if result is None:
            raise ApiError(404, NOT_FOUND)
        old_hash, row = result
        await self.dropped(old_hash)
        return with_secret(row, plaintext)


class ApiKeyRoutes:
    """Mounted at ``/api/user/api-keys``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.actions = KeyActions(ctx)

    @app.route("/", methods=["GET"])
    @json_route
    async def list_keys(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await self.ctx.db.transaction(key_store.list_for_user, user["id"])
        return [key_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        changes = parse_key_input(read_object(request, optional=True), creating=True).changes
        return await self.actions.create(user, changes)

    @app.route("/<int:key_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, key_id: int) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        changes = parse_key_input(read_object(request), creating=False).changes
        if not changes:
            row = await self.ctx.db.transaction(key_store.get_for_user, user["id"], key_id)
        else:
            try:
                row = await self.ctx.db.transaction(
                    key_store.update_fields, user["id"], key_id, changes, self.ctx.now())
            except key_store.KeyInputError as exc:
                raise ApiError(400, exc.message, field=exc.field) from None
        if row is None:
            raise ApiError(404, NOT_FOUND)
        await self.actions.dropped(row["key_hash"])
        return key_view(row)

    @app.route("/<int:key_id>/rotate", methods=["POST"])
    @json_route
    async def rotate(self, request: Any, key_id: int) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        return await self.actions.rotate(user, key_id)

    @app.route("/<int:key_id>/reset-usage", methods=["POST"])
    @json_route
    async def reset_usage(self, request: Any, key_id: int) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        row = await self.ctx.db.transaction(
            key_store.reset_usage, user["id"], key_id, self.ctx.now())
        if row is None:
            raise ApiError(404, NOT_FOUND)
        await self.actions.dropped(row["key_hash"])
        return key_view(row)

    @app.route("/<int:key_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, key_id: int) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        key_hash = await self.ctx.db.transaction(key_store.remove, user["id"], key_id)
        if key_hash is None:
            raise ApiError(404, NOT_FOUND)
        await self.actions.dropped(key_hash)
        return {"message": "API key deleted"}


class LegacyApiKeyRoutes:
    """Mounted at ``/api/user/api-key``: ``POST /rotate`` rotates ``{id}``, else creates a key."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.actions = KeyActions(ctx)

    @app.route("/rotate", methods=["POST"])
    @json_route
    async def rotate(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        key_id = Body(read_object(request, optional=True)).integer("id", minimum=1)
        if key_id is not MISSING:
            return await self.actions.rotate(user, key_id)
        changes = parse_key_input({"name": LEGACY_NAME}, creating=True).changes
        return await self.actions.create(user, changes)
