"""The admin pages closed after issue 21 in a real headless Chromium: meta models (list,
create in a dialog, the DSL validated as typed and on Validate with the API's own error text,
delete), the user-channel access dialog edited with the keyboard only (no ``window.prompt``),
and a channel's group multipliers set in the channel dialog.
"""

from __future__ import annotations

from typing import Any, ClassVar

from playwright.sync_api import expect

from tests.web.browser import ADMIN
from tests.web.test_browser import BrowserCase

NO_OTHERWISE = 'route {\n  when request.total_estimated_tokens > 10 => call "small"\n}'
NO_OTHERWISE_ERROR = "line 3:1: route requires an otherwise branch"
PROGRAM = ('route {\n  when request.total_estimated_tokens > 32000 => call "large"\n'
           '  otherwise => call "small"\n}')


class AdminGapTests(BrowserCase):
    admin_token: ClassVar[str]

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.admin_token = cls.server.call("POST", "/api/setup", ADMIN)["token"]
        cls.server.call("PUT", "/api/settings", {"ssrf_allow_private_networks": True},
                        token=cls.admin_token)

    def admin(self, path: str) -> Any:
        watched = self.watched()
        self.open_signed_in(watched, self.admin_token)
        watched.page.goto(self.server.base + path)
        return watched

    def test_meta_model_created_validated_and_deleted_in_the_ui(self) -> None:
        for name in ("large", "small"):
            self.server.call("POST", "/api/models", {"model_name": name},
                             token=self.admin_token)
        watched = self.watched()
        page = watched.page
        self.open_signed_in(watched, self.admin_token)
        page.get_by_role("navigation").get_by_role("link", name="Meta models").click()
        expect(page.get_by_role("heading", level=1, name="Meta models")).to_be_visible()
        expect(page.get_by_text("No meta models yet")).to_be_visible()

        page.get_by_role("button", name="Add meta model").click()
        dialog = page.get_by_role("dialog", name="Add meta model")
        dialog.get_by_label("Public model name").fill("smart")
        dialog.get_by_label("Label").fill("Smart router")
        dialog.get_by_label("Description").fill("routes by size")
        dialog.get_by_label("DSL source").fill(NO_OTHERWISE)
        # validated as typed (no click): the API's own text, at its line and column
        expect(dialog.get_by_role("alert")).to_have_text(NO_OTHERWISE_ERROR)
        dialog.get_by_role("button", name="Validate").click()
        expect(dialog.get_by_role("alert")).to_have_text(NO_OTHERWISE_ERROR)
        watched.screenshot("meta-model-invalid")
        # saving the same program is refused with the same text, and stores nothing
        dialog.get_by_role("button", name="Save").click()
        expect(dialog.get_by_role("alert").filter(has_text=NO_OTHERWISE_ERROR)
               ).to_have_count(2)
        assert self.server.call("GET", "/api/meta-models", token=self.admin_token) == []

        dialog.get_by_label("DSL source").fill(PROGRAM)
        expect(dialog.get_by_role("alert")).to_have_count(1)
        dialog.get_by_role("button", name="Validate").click()
        expect(dialog.get_by_role("status")).to_have_text("The program is valid")
        dialog.get_by_label("Billing mode").select_option("meta")
        dialog.get_by_label("Input price", exact=True).fill("1.5")
        dialog.get_by_label("Output price", exact=True).fill("2")
        dialog.get_by_label("Expose referenced models").uncheck()
        dialog.get_by_role("button", name="Save").click()
        expect(dialog).to_be_hidden()
        row = page.get_by_role("row").filter(has_text="smart")
        expect(row.get_by_role("cell", name="Smart router", exact=True)).to_be_visible()
        expect(row.get_by_role("cell", name="1.5", exact=True)).to_be_visible()
        [stored] = self.server.call("GET", "/api/meta-models", token=self.admin_token)
        assert stored["model_name"] == "smart" and stored["dsl"] == PROGRAM, stored
        assert stored["billing_mode"] == "meta" and stored["output_price"] == "2", stored
        assert stored["expose_referenced_models"] is False, stored

        row.get_by_role("button", name="Edit").click()
        dialog = page.get_by_role("dialog", name="Edit meta model")
        expect(dialog.get_by_label("DSL source")).to_have_value(PROGRAM)
        dialog.get_by_label("Output price", exact=True).fill("2.5")
        dialog.get_by_role("button", name="Save").click()
        expect(row.get_by_role("cell", name="2.5", exact=True)).to_be_visible()

        row.get_by_role("button", name="Delete").click()
        page.get_by_role("dialog", name="Delete meta model").get_by_role(
            "button", name="Delete").click()
        expect(page.get_by_text("No meta models yet")).to_be_visible()
        assert self.server.call("GET", "/api/meta-models", token=self.admin_token) == []
        self.assert_clean(watched, allowed_errors=("status of 400",))

    def test_user_channel_access_edited_with_the_keyboard_only(self) -> None:
        token = self.admin_token
        gold = self.server.call("POST", "/api/groups", {"name": "gold"}, token=token)
        self.server.call("POST", "/api/groups", {"name": "silver"}, token=token)
        channel = self.server.call("POST", "/api/user-channels", {"name": "premium"},
                                   token=token)
        user = self.server.call("POST", "/auth/password/register", {
            "username": "bob", "email": "bob@example.com", "password": "bob-password"})
        user_id = user["user"]["id"]
        watched = self.admin("/admin/user-channels")
        page = watched.page
        page.add_init_script("window.prompt = () => { throw new Error('window.prompt'); }")
        row = page.get_by_role("row").filter(has_text="premium")
        row.get_by_role("button", name="Access").focus()
        page.keyboard.press("Enter")
        dialog = page.get_by_role("dialog", name="Channel access")
        expect(dialog.get_by_role("group", name="Allowed groups")).to_be_visible()
        gold_box = dialog.get_by_role("checkbox", name="gold", exact=True)
        expect(gold_box).to_be_visible()
        for _ in range(10):
            if gold_box.evaluate("box => box === document.activeElement"):
                break
            page.keyboard.press("Tab")
        else:
            raise AssertionError("Tab never reached the 'gold' checkbox")
        page.keyboard.press("Space")
        expect(gold_box).to_be_checked()
        expect(dialog.get_by_role("checkbox", name="silver", exact=True)).not_to_be_checked()
        users = dialog.get_by_label("Allowed user ids")
        for _ in range(4):
            if users.evaluate("field => field === document.activeElement"):
                break
            page.keyboard.press("Tab")
        else:
            raise AssertionError("Tab never reached 'Allowed user ids'")
        page.keyboard.type(f"{user_id}, x7")
        page.keyboard.press("Enter")
        expect(dialog.get_by_role("alert")).to_have_text(
            "Allowed user ids must be whole numbers: “x7” is not")
        page.keyboard.press("Backspace")
        page.keyboard.press("Backspace")
        page.keyboard.press("Backspace")
        page.keyboard.press("Backspace")
        page.keyboard.press("Enter")
        expect(dialog).to_be_hidden()
        expect(row.get_by_role("cell", name="gold", exact=True)).to_be_visible()
        expect(row.get_by_role("cell", name="bob", exact=True)).to_be_visible()
        stored = self.server.call("GET", f"/api/user-channels/{channel['id']}", token=token)
        assert [g["group_id"] for g in stored["allowed_groups"]] == [gold["id"]], stored
        assert [u["user_id"] for u in stored["allowed_users"]] == [user_id], stored
        watched.screenshot("user-channel-access")
        self.assert_clean(watched)

    def test_channel_group_multipliers_in_the_channel_dialog(self) -> None:
        token = self.admin_token
        group = self.server.call("POST", "/api/groups", {"name": "bronze"}, token=token)
        watched = self.admin("/admin/channels")
        page = watched.page
        page.get_by_role("button", name="Add channel").click()
        dialog = page.get_by_role("dialog", name="Add channel")
        dialog.get_by_label("Name").fill("multiplied")
        dialog.get_by_label("Base URL").fill("http://127.0.0.1:9/")
        dialog.get_by_label("API key").fill("sk-none")
        multiplier = dialog.get_by_role("group", name="Group multipliers").get_by_label(
            "Multiplier for bronze")
        multiplier.fill("-2")
        dialog.get_by_role("button", name="Save").click()
        expect(dialog.get_by_role("alert")).to_have_text(
            "The multiplier for bronze must be a number of at least 0")
        assert [c["name"] for c in self.server.call("GET", "/api/channels", token=token)
                if c["name"] == "multiplied"] == []
        multiplier.fill("1.25")
        dialog.get_by_role("button", name="Save").click()
        expect(dialog).to_be_hidden()
        row = page.get_by_role("row").filter(has_text="multiplied")
        expect(row.get_by_role("cell", name="bronze: 1.25")).to_be_visible()
        [stored] = [c for c in self.server.call("GET", "/api/channels", token=token)
                    if c["name"] == "multiplied"]
        assert [(m["group_id"], m["multiplier"]) for m in stored["group_multipliers"]] == [
            (group["id"], "1.25")], stored

        row.get_by_role("button", name="Edit").click()
        dialog = page.get_by_role("dialog", name="Edit channel")
        expect(dialog.get_by_label("Multiplier for bronze")).to_have_value("1.25")
        dialog.get_by_label("Multiplier for bronze").fill("")
        dialog.get_by_role("button", name="Save").click()
        expect(dialog).to_be_hidden()
        expect(row.get_by_role("cell", name="bronze: 1.25")).to_have_count(0)
        [stored] = [c for c in self.server.call("GET", "/api/channels", token=token)
                    if c["name"] == "multiplied"]
        assert stored["group_multipliers"] == [], stored
        self.assert_clean(watched)
