"""Shared pieces of the studio route tests: two users, a studio, and JSON calls as each.

Not a test module itself (no ``test_`` prefix), so nothing here is collected twice.
"""

from __future__ import annotations

from typing import Any

from tests.console.assistant.assistant_case import AssistantCase
from tests.support.app import Response

COMPANY = "/api/user/personal-company"


def team(*types: str) -> list[dict[str, Any]]:
    """Members of the given types, each bound to chat agent ``default``."""
    return [{"id": f"m{i}", "name": f"Member {i}", "type": kind, "chat_agent_id": "default"}
            for i, kind in enumerate(types)]


STANDARD = ("chief", "worker", "reviewer", "checker")


class StudioCase(AssistantCase):
    async def studio(self, studio_id: str = "growth", *, token: str | None = None) -> Any:
        return await self.ok("POST", "/agent-groups", {
            "id": studio_id, "name": "Growth studio", "agents": team(*STANDARD)}, token=token)

    async def company(self, method: str, path: str, json: Any = None, *,
                      studio_id: str | None = "growth", token: str | None = None) -> Response:
        if not self.alice:
            await self.users()
        query = "" if studio_id is None else f"?studio_id={studio_id}"
        return await self.call(method, COMPANY + path + query, json, token=token or self.alice)

    async def company_ok(self, method: str, path: str, json: Any = None, *, status: int = 200,
                         studio_id: str = "growth", token: str | None = None) -> Any:
        response = await self.company(method, path, json, studio_id=studio_id, token=token)
        assert response.status == status, (method, path, json, response)
        return response.json()

    async def company_refused(self, method: str, path: str, json: Any, status: int,
                              message: str, *, studio_id: str | None = "growth",
                              token: str | None = None, tables: tuple[str, ...] = ()) -> Any:
        """The call answers ``status`` with exactly ``message`` and changes none of ``tables``."""
        before = await self.snapshot(*tables)
        response = await self.company(method, path, json, studio_id=studio_id, token=token)
        assert response.status == status, (method, path, json, response)
        assert response.json()["error"] == message, (json, response.json())
        assert await self.snapshot(*tables) == before, json
        return response.json()
