"""First-run setup: ``GET /api/setup/status`` and ``POST /api/setup`` (contract §3.6).

Exactly one administrator is ever created here, however many calls race: the transaction
inserts the ``setup_completed_at`` settings row, whose primary key lets one writer win.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.identity import registration, throttle
from console.user_view import user_view
from console.validation import MISSING, Body
from gateway.store import users as user_store
from gateway.store.connection import Connection
from gateway.store.first_run import SetupAlreadyCompleted, mark_setup_completed
from gateway.store.upsert import upsert_setting


class SetupConflict(Exception):
    pass


def _create_first_admin(conn: Connection, fields: dict[str, Any], now: datetime
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
    if user_store.admin_exists(conn):
        raise SetupConflict()
    try:
        mark_setup_completed(conn, now)
    except SetupAlreadyCompleted:
        raise SetupConflict() from None
    user_id = user_store.create_user(
        conn, username=fields["username"], email=fields["email"],
        password_hash=fields["password_hash"], now=now, is_admin=True, email_verified=True,
        group_id=fields["group_id"],
    )
    settings = {"oidc_enabled": "false", "password_login_enabled": "true",
                "password_registration_enabled": "true"}
    if fields["site_name"]:
        settings["site_name"] = fields["site_name"]
    for key, value in settings.items():
        upsert_setting(conn, key, value, now)
    user = user_store.get_user(conn, user_id)
    assert user is not None
    return user, user_store.user_relations(conn, user)


class SetupRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/status", methods=["GET"])
    @json_route
    async def status(self, request: Any) -> dict[str, bool]:
        exists = await self.ctx.db.transaction(user_store.admin_exists)
        return {"required": not exists}

    @app.route("/", methods=["POST"])
    @json_route
    async def setup(self, request: Any) -> dict[str, Any]:
        await self.ctx.throttle.check(request, throttle.SETUP)
        body = Body(read_object(request))
        site_name = body.string("site_name", max_length=80)
        username = registration.clean_username(body.data.get("username"))
        email = registration.clean_email(body.data.get("email"))
        password = registration.clean_password(body.data.get("password"))
        settings = self.ctx.settings
        registration.check_email_domain(settings, email)
        fields = {
            "site_name": "" if site_name is MISSING else site_name,
            "username": username,
            "email": email,
            "password_hash": await self.ctx.passwords.hash(password),
            "group_id": registration.routed_group_id(settings, email),
        }
        try:
            user, relations = await self.ctx.db.transaction(
                _create_first_admin, fields, self.ctx.now())
        except SetupConflict:
            raise ApiError(409, "Initial setup is already complete") from None
        except user_store.UniqueViolation as exc:
            raise ApiError(409, f"{exc.field} already exists", field=exc.field) from None
        await self.ctx.live_settings.announce()
        return {"token": self.ctx.issue_token(user), "user": user_view(user, relations)}
