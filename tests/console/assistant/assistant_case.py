"""Shared pieces of the assistant route tests: an admin, two users, and JSON calls as each.

Not a test module itself (no ``test_`` prefix), so nothing here is collected twice.
"""

from __future__ import annotations

from typing import Any

from tests.console.admin_case import AdminCase
from tests.support.app import Response

USER_PATH = "/api/user/advanced-chat"


class AssistantCase(AdminCase):
    alice: str = ""
    bob: str = ""

    async def users(self) -> None:
        await self.admin()
        self.alice = (await self.register("alice"))["token"]
        self.bob = (await self.register("bob"))["token"]

    async def as_user(self, method: str, path: str, json: Any = None, *,
                      token: str | None = None, data: bytes | None = None) -> Response:
        if not self.alice:
            await self.users()
        return await self.call(method, USER_PATH + path, json, token=token or self.alice,
                               data=data)

    async def ok(self, method: str, path: str, json: Any = None, *,
                 token: str | None = None) -> Any:
        response = await self.as_user(method, path, json, token=token)
        assert response.status == 200, (method, path, response)
        return response.json()

    async def refused_with(self, method: str, path: str, json: Any, status: int, message: str,
                           *, token: str | None = None, tables: tuple[str, ...] = ()) -> None:
        """The call answers ``status`` with exactly ``message`` and changes none of ``tables``."""
        if not self.alice:
            await self.users()
        before = await self.snapshot(*tables)
        response = await self.as_user(method, path, json, token=token)
        assert response.status == status, (json, response)
        assert response.json()["error"] == message, (json, response.json())
        assert await self.snapshot(*tables) == before, json
