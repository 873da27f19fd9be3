"""``POST /auth/passkey/login/options`` and ``POST /auth/passkey/login`` (contract §2.5, §2.6).

Mounted at ``auth/passkey``.  The ceremony itself lives in ``console.services.passkeys``; this
group applies the route-level order: throttle, agreement, setup gate, then the ceremony.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.services.identity import registration, throttle
from console.services.identity.passkeys import Passkeys
from console.user_view import user_view
from gateway.store import users as user_store


class PasskeyAuthRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx
        self.passkeys = Passkeys(ctx)

    async def _setup_gate(self) -> None:
        if not await self.ctx.db.transaction(user_store.admin_exists):
            raise ApiError(409, "Initial setup is required", type="setup_required")

    @app.route("/login/options", methods=["POST"])
    @json_route
    async def login_options(self, request: Any) -> dict[str, Any]:
        body = read_object(request, optional=True)
        await self.ctx.throttle.check(request, throttle.PASSKEY)
        registration.check_agreement(self.ctx.settings, body.get("agreement_accepted"))
        await self._setup_gate()
        identifier = body.get("identifier")
        if identifier is not None and not isinstance(identifier, str):
            raise bad_request("identifier must be a string", field="identifier")
        identifier = identifier.strip() if identifier else None
        return await self.passkeys.login_options(identifier or None)

    @app.route("/login", methods=["POST"])
    @json_route
    async def login(self, request: Any) -> dict[str, Any]:
        body = read_object(request)
        await self.ctx.throttle.check(request, throttle.PASSKEY)
        await self._setup_gate()
        user, relations = await self.passkeys.login(body)
        return {"token": self.ctx.issue_token(user), "user": user_view(user, relations)}
