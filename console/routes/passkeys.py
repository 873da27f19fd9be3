"""The signed-in user's passkeys: list, register (options + response), delete (contract §4.10).

Mounted at ``api/user/passkeys``.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, not_found, read_object
from console.services.identity.passkeys import Passkeys, passkey_view
from gateway.store import passkeys as passkey_store


class PasskeyRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.passkeys = Passkeys(ctx)

    @app.route("/", methods=["GET"])
    @json_route
    async def list(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await self.ctx.db.transaction(passkey_store.list_for_user, user["id"])
        return [passkey_view(row) for row in rows]

    @app.route("/register/options", methods=["POST"])
    @json_route
    async def register_options(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        return await self.passkeys.registration_options(user)

    @app.route("/register", methods=["POST"])
    @json_route
    async def register(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        body = read_object(request)
        return await self.passkeys.register(user, body)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        removed = await self.ctx.db.transaction(passkey_store.delete_for_user, user["id"],
                                                item_id)
        if not removed:
            raise not_found("Passkey not found")
        return {"message": "Passkey deleted"}
