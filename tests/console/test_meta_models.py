"""``/api/meta-models``: CRUD with both field spellings, the plan, validation in contract order."""

from __future__ import annotations

from typing import Any

from tests.console.admin_case import AdminCase

TABLES = ("meta_models", "models")
PROGRAM = ('route {\n  when request.total_estimated_tokens > 32000 => call "large"\n'
           '  otherwise => switch { weight 90 => call "small"; weight 10 => call "canary" }\n}')


class MetaModelTests(AdminCase):
    async def models(self, *names: str) -> None:
        for name in names:
            created = await self.api("POST", "/api/models", {"model_name": name})
            assert created.status == 200, created

    async def test_create_list_show_update_delete(self) -> None:
        await self.models("large", "small", "canary")
        created = await self.api("POST", "/api/meta-models", {
            "name": "smart", "dsl": PROGRAM, "description": "routes by size",
            "billing_mode": "meta", "input_price": "1.5", "output_price": 2,
            "expose_referenced_models": False})
        assert created.status == 200, created
        body = created.json()
        meta = body["meta_model"]
        assert meta["name"] == "smart" and meta["model_name"] == "smart"
        assert meta["dsl"] == PROGRAM and meta["definition"] == PROGRAM
        assert meta["billing_mode"] == "meta" and meta["input_price"] == "1.5"
        assert meta["output_price"] == "2" and meta["cached_input_price"] == "0"
        assert meta["provider"] == "meta" and meta["provider_name"] == "Meta Module"
        assert meta["expose_referenced_models"] is False and meta["enabled"] is True
        assert body["plan"]["root"]["kind"] == "route"
        assert body["plan"]["root"]["routes"][1]["action"]["switches"][0]["weight"] == 90
        assert self.announced, "a meta-model write reloads the gateway catalog"
        # the spec's spelling: model_name is the public name, definition the program
        spec = await self.api("POST", "/api/meta-models", {
            "name": "Fast label", "model_name": "fast", "definition": {"dsl": 'call "small"'},
            "enabled": False, "billing_mode": "actual", "input_price": 9})
        assert spec.status == 200, spec
        fast = spec.json()["meta_model"]
        assert fast["name"] == "Fast label" and fast["model_name"] == "fast"
        assert fast["enabled"] is False and fast["input_price"] == "0"  # forced in actual mode
        listed = (await self.api("GET", "/api/meta-models")).json()
        assert [m["model_name"] for m in listed] == ["fast", "smart"]
        updated = await self.api("PUT", f"/api/meta-models/{meta['id']}", {
            "name": "smart", "dsl": 'call "large"'})
        assert updated.status == 200, updated
        changed = updated.json()["meta_model"]
        # full replace, except enabled and expose_referenced_models which keep their values
        assert changed["dsl"] == 'call "large"' and changed["billing_mode"] == "actual"
        assert changed["input_price"] == "0" and changed["expose_referenced_models"] is False
        shown = (await self.api("GET", f"/api/meta-models/{meta['id']}")).json()
        assert shown["plan"] == {"options": [], "root": {"kind": "call", "model": "large"}}
        deleted = await self.api("DELETE", f"/api/meta-models/{meta['id']}")
        assert deleted.json() == {"message": "Meta model deleted"}
        missing = await self.api("GET", f"/api/meta-models/{meta['id']}")
        assert missing.status == 404 and missing.json()["error"] == "Meta model not found"

    async def test_a_plan_object_is_stored_as_source(self) -> None:
        await self.models("a", "b")
        plan = {"options": [], "root": {"kind": "parallel", "calls": [
            {"kind": "call", "model": "a"}, {"kind": "call", "model": "b"}],
            "synthesize_model": "a"}}
        created = await self.api("POST", "/api/meta-models", {"name": "both",
                                                               "definition": plan})
        assert created.status == 200, created
        assert created.json()["meta_model"]["dsl"] == (
            'parallel { call "a"; call "b" } synthesize "a"\n')
        assert created.json()["plan"] == plan

    async def test_validation_messages_in_contract_order(self) -> None:
        await self.models("large", "small", "canary")
        await self.api("POST", "/api/meta-models", {"name": "other", "dsl": 'call "small"'})
        cases: list[tuple[dict[str, Any], str]] = [
            ({"dsl": PROGRAM}, "Meta model name is required"),
            ({"name": "m", "billing_mode": "free", "input_price": -1, "dsl": ""},
             "Invalid billing mode"),
            ({"name": "m", "input_price": -1, "dsl": ""}, "Prices must not be negative"),
            ({"name": "m", "dsl": "  "}, "DSL is required"),
            ({"name": "m", "dsl": 'route {\n  when a.b == 1 => call "x"\n}'},
             "line 3:1: route requires an otherwise branch"),
            ({"name": "m", "dsl": 'switch { weight 1 => call "small" }\n'
                                  'call "x"'},
             'line 2:1: unexpected "call" after the program\'s action'),
            ({"name": "m", "dsl": "parallel { " + 'call "small" ' * 9 + "}"},
             "parallel accepts at most 8 calls"),
            ({"name": "m", "dsl": 'route { when request.colour == "x" => call "small"\n'
                                  'otherwise => call "m" }'},
             "Unknown variable: request.colour"),
            ({"name": "m", "dsl": 'call "m"'}, "Meta model cannot reference itself"),
            ({"name": "m", "dsl": 'call "other"'},
             "Meta model cannot reference another meta model yet: other"),
            ({"name": "m", "dsl": 'call "nowhere"'}, "Referenced model not found: nowhere"),
            ({"name": "m", "definition": {"root": {"kind": "judge"}}},
             "definition.root.model must be a string"),
        ]
        for payload, message in cases:
            with self.subTest(payload=payload):
                await self.assert_refused("POST", "/api/meta-models", payload, 400, TABLES,
                                          message=message)
                checked = await self.api("POST", "/api/meta-models/validate", payload)
                if payload.get("name"):
                    assert checked.status == 400 and checked.json()["error"] == message
                    assert checked.json()["valid"] is False
                    assert checked.json()["errors"][0] == message

    async def test_validate_answers_the_plan_and_stores_nothing(self) -> None:
        await self.models("large", "small", "canary")
        checked = await self.api("POST", "/api/meta-models/validate", {"dsl": PROGRAM})
        assert checked.status == 200, checked
        assert checked.json()["valid"] is True and checked.json()["errors"] == []
        assert checked.json()["plan"]["root"]["kind"] == "route"
        assert await self.rows("meta_models") == []

    async def test_names_are_shared_with_global_models(self) -> None:
        await self.models("small", "large")
        await self.assert_refused("POST", "/api/meta-models", {"name": "small",
                                                                "dsl": 'call "large"'},
                                  409, TABLES, field="model_name")
        made = await self.api("POST", "/api/meta-models", {"name": "alias", "dsl": 'call "small"'})
        assert made.status == 200
        await self.assert_refused("POST", "/api/models", {"model_name": "alias"}, 409, TABLES)
        await self.assert_refused("POST", "/api/meta-models", {"name": "alias",
                                                                "dsl": 'call "small"'},
                                  409, TABLES, field="model_name")
        await self.assert_refused("PUT", "/api/meta-models/999", {"name": "x",
                                                                   "dsl": 'call "small"'},
                                  404, TABLES, message="Meta model not found")

    async def test_users_cannot_manage_meta_models(self) -> None:
        await self.admin()
        user = await self.register("plainuser")
        for method, path in (("GET", "/api/meta-models"), ("POST", "/api/meta-models/validate")):
            answer = await self.call(method, path, {"name": "x", "dsl": 'call "y"'},
                                     token=user["token"])
            assert answer.status == 403, answer
