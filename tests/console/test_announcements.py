"""``/api/announcements`` (admin CRUD) and ``GET /api/public/announcements``."""

from __future__ import annotations

from typing import Any

from tests.console.admin_case import AdminCase


class AnnouncementsTest(AdminCase):
    async def create(self, payload: dict[str, Any]) -> dict[str, Any]:
        response = await self.api("POST", "/api/announcements", payload)
        self.assertEqual(response.status, 200, response)
        return response.json()

    async def test_create_defaults_and_trim(self) -> None:
        item = await self.create({"title": "  Maintenance  ", "content": "Down at 02:00"})
        self.assertEqual((item["title"], item["enabled"], item["sort_order"]),
                         ("Maintenance", True, 0))
        self.assertEqual(item["created_at"], "2027-01-15T08:00:00Z")
        shown = await self.api("GET", f"/api/announcements/{item['id']}")
        self.assertEqual(shown.json(), item)
        off = await self.create({"title": "Off", "content": "x", "enabled": False,
                                 "sort_order": -2})
        self.assertEqual((off["enabled"], off["sort_order"]), (False, -2))

    async def test_validation_changes_nothing(self) -> None:
        cases = [
            ({"content": "x"}, "Announcement title is required"),
            ({"title": "   ", "content": "x"}, "Announcement title is required"),
            ({"title": "t" * 121, "content": "x"}, "Announcement title is too long"),
            ({"title": "t"}, "Announcement content is required"),
            ({"title": "t", "content": "  "}, "Announcement content is required"),
            ({"title": "t", "content": "x", "sort_order": "first"}, None),
            ({"title": "t", "content": "x", "enabled": "maybe"}, None),
        ]
        for payload, message in cases:
            await self.assert_refused("POST", "/api/announcements", payload, 400,
                                      ("announcements",), message=message)
        await self.create({"title": "t" * 120, "content": "x"})

    async def test_update_replaces_the_form_and_delete(self) -> None:
        item = await self.create({"title": "A", "content": "a", "enabled": False,
                                  "sort_order": 5})
        self.clock.advance(60)
        response = await self.api("PUT", f"/api/announcements/{item['id']}",
                                  {"title": "B", "content": "b"})
        self.assertEqual(response.status, 200, response)
        updated = response.json()
        self.assertEqual((updated["title"], updated["enabled"], updated["sort_order"]),
                         ("B", True, 0))
        self.assertEqual(updated["updated_at"], "2027-01-15T08:01:00Z")
        self.assertEqual(updated["created_at"], item["created_at"])
        missing = await self.api("PUT", "/api/announcements/999", {"title": "B", "content": "b"})
        self.assertEqual((missing.status, missing.json()["error"]),
                         (404, "Announcement not found"))
        await self.assert_refused("PUT", f"/api/announcements/{item['id']}", {"title": ""},
                                  400, ("announcements",))
        bad = await self.api("DELETE", "/api/announcements/abc")
        self.assertEqual((bad.status, bad.json()["error"]), (400, "Invalid announcement id"))
        gone = await self.api("DELETE", f"/api/announcements/{item['id']}")
        self.assertEqual(gone.json(), {"message": "Announcement deleted"})
        self.assertEqual((await self.api("DELETE", f"/api/announcements/{item['id']}")).status,
                         404)
        self.assertEqual(await self.rows("announcements"), [])

    async def test_order_and_public_list(self) -> None:
        first = await self.create({"title": "old", "content": "x", "sort_order": 1})
        self.clock.advance(10)
        newer = await self.create({"title": "new", "content": "x", "sort_order": 1})
        top = await self.create({"title": "top", "content": "x", "sort_order": -1})
        hidden = await self.create({"title": "hidden", "content": "x", "enabled": False})
        admin_list = (await self.api("GET", "/api/announcements")).json()
        self.assertEqual([a["id"] for a in admin_list],
                         [top["id"], hidden["id"], newer["id"], first["id"]])
        public = await self.call("GET", "/api/public/announcements")
        self.assertEqual(public.status, 200)
        self.assertEqual([a["title"] for a in public.json()], ["top", "new", "old"])
        self.assertEqual(set(public.json()[0]), {"id", "title", "content", "enabled",
                                                 "sort_order", "created_at", "updated_at"})

    async def test_admin_only(self) -> None:
        await self.admin()
        user = await self.register("carol")
        response = await self.call("POST", "/api/announcements", {"title": "t", "content": "x"},
                                   token=user["token"])
        self.assertEqual(response.status, 403)
        self.assertEqual((await self.call("GET", "/api/announcements")).status, 401)
