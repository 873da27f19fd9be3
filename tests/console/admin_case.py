"""Shared pieces of the admin catalog route tests: an admin session and table snapshots.

Not a test module itself (no ``test_`` prefix), so nothing here is collected twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from gateway.invalidation import CATALOG, USERS
from gateway.store import schema
from tests.support.app import AppTestCase, Response


class AdminCase(AppTestCase):
    token: str = ""

    def setUp(self) -> None:
        super().setUp()
        self.announced: list[tuple[str, bytes]] = []

        async def record_catalog(detail: bytes) -> None:
            self.announced.append((CATALOG, detail))

        async def record_users(detail: bytes) -> None:
            self.announced.append((USERS, detail))

        self.ctx.invalidation.on(CATALOG, record_catalog)
        self.ctx.invalidation.on(USERS, record_users)

    async def admin(self) -> str:
        if not self.token:
            self.token = await self.setup_admin()
        return self.token

    async def api(self, method: str, path: str, json: Any = None, *,
                  token: str | None = None, data: bytes | None = None) -> Response:
        return await self.call(method, path, json, token=token or await self.admin(), data=data)

    async def rows(self, table_name: str) -> list[dict[str, Any]]:
        table = schema.metadata.tables[table_name]
        order = list(table.primary_key.columns)

        def read(conn: Any) -> list[dict[str, Any]]:
            return [dict(r) for r in conn.execute(select(table).order_by(*order)).mappings()]

        return await self.ctx.db.transaction(read)

    async def snapshot(self, *tables: str) -> dict[str, list[dict[str, Any]]]:
        return {name: await self.rows(name) for name in tables}

    async def assert_refused(self, method: str, path: str, payload: Any, status: int,
                             tables: tuple[str, ...], *, field: str | None = None,
                             data: bytes | None = None, message: str | None = None) -> None:
        """The call answers ``status`` with a JSON error and changes none of ``tables``."""
        before = await self.snapshot(*tables)
        announced = len(self.announced)
        response = await self.api(method, path, payload, data=data)
        assert response.status == status, (payload, response)
        body = response.json()
        assert body["error"], body
        if field is not None:
            assert body.get("field") == field, (payload, body)
        if message is not None:
            assert body["error"] == message, body
        assert await self.snapshot(*tables) == before, payload
        assert len(self.announced) == announced, "a refused write must not announce"
