"""Meta models executed by the gateway, called through the official SDKs (issue 17).

A running Lockgate relays to a real loopback upstream that records which model it was asked
for, so each test checks the branch a program took, the exact nano-unit cost in the usage log
and the wallet, and both billing modes (console contract §6.3).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import anthropic
import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from gateway.billing.money import to_nanos
from gateway.store import schema
from tests.gateway.gateway_case import INPUT_PRICE, OUTPUT_PRICE
from tests.gateway.test_anthropic_sdk import TEXT, NativeGatewayCase
from tests.support.upstream import count_prompt_tokens

#: the dear model's prices per 1M tokens (the cheap one, ``gpt-fake``, has the case's prices)
BIG_INPUT, BIG_OUTPUT = "3000", "5000"
#: the meta model's own prices in ``meta`` mode
META_INPUT, META_OUTPUT = "500", "700"
BY_LENGTH = """
# long prompts to the big model
route {
  when request.input_tokens > 100 => call "gpt-big"
  otherwise => call "gpt-fake"
}
"""
LONG = " ".join(["word"] * 200)


def cost_nanos(prompt: int, completion: int, input_price: str, output_price: str) -> int:
    return to_nanos((Decimal(prompt) * Decimal(input_price)
                     + Decimal(completion) * Decimal(output_price)) / Decimal(1_000_000))


class MetaModelCase(NativeGatewayCase):
    """The case's ``gpt-fake`` plus a dearer ``gpt-big`` on the same channel."""

    async def setup_meta(self, dsl: str = BY_LENGTH, *, balance: str = "100",
                         key_body: dict[str, Any] | None = None, big_output: str = BIG_OUTPUT,
                         **meta: Any) -> dict[str, Any]:
        await self.provision(balance=balance, key_body=key_body)
        big = await self.catalog.model("gpt-big", input=BIG_INPUT, output=big_output)
        await self.catalog.config(self.channel_id, big)
        await self.catalog.announce()
        return await self.create_meta(dsl, **meta)

    async def create_meta(self, dsl: str, name: str = "auto", **fields: Any) -> dict[str, Any]:
        created = await self.call("POST", "/api/meta-models", {"name": name, "dsl": dsl, **fields},
                                  token=self.admin_token)
        assert created.status == 200, created
        return created.json()["meta_model"]  # type: ignore[no-any-return]

    def upstream_models(self) -> list[str]:
        return [r.body["model"] for r in self.fake.requests]

    async def chat(self, content: str, model: str = "auto", **kwargs: Any) -> Any:
        client = self.openai_client()
        return await self.in_thread(
            client.chat.completions.with_raw_response.create, model=model,
            messages=[{"role": "user", "content": content}], **kwargs)


class ExecutionTests(MetaModelCase):
    async def test_prompt_length_picks_the_model_and_actual_mode_bills_it(self) -> None:
        await self.setup_meta()
        before = await self.balance_nanos(self.user_id)
        short = await self.chat("hello there")
        long = await self.chat(LONG)
        assert short.parse().choices[0].message.content == TEXT
        assert long.parse().choices[0].message.content == TEXT
        assert self.upstream_models() == ["gpt-fake", "gpt-big"]
        rows = await self.usage_rows()
        assert [(r["model_name"], r["meta_model_name"]) for r in rows] == [
            ("gpt-fake", "auto"), ("gpt-big", "auto")]
        prompts = [count_prompt_tokens(r.body) for r in self.fake.requests]
        expected = [cost_nanos(prompts[0], 3, INPUT_PRICE, OUTPUT_PRICE),
                    cost_nanos(prompts[1], 3, BIG_INPUT, BIG_OUTPUT)]
        assert [r["cost_nanos"] for r in rows] == expected
        assert await self.balance_nanos(self.user_id) == before - sum(expected)
        assert await self.ledger_sum(self.user_id) == -sum(expected)
        # every /v1 answer names its call: the usage log's request id
        assert [short.headers["x-request-id"], long.headers["x-request-id"]] == [
            r["request_id"] for r in rows]
        await self.verify_ledger()

    async def test_meta_mode_bills_the_meta_prices_under_the_meta_name(self) -> None:
        await self.setup_meta(billing_mode="meta", input_price=META_INPUT,
                              output_price=META_OUTPUT)
        before = await self.balance_nanos(self.user_id)
        await self.chat(LONG)
        assert self.upstream_models() == ["gpt-big"]
        (row,) = await self.usage_rows()
        assert row["model_name"] == "auto" and row["meta_model_name"] == "auto"
        prompt = count_prompt_tokens(self.fake.requests[0].body)
        expected = cost_nanos(prompt, 3, META_INPUT, META_OUTPUT)
        assert row["cost_nanos"] == expected and row["input_tokens"] == prompt
        assert row["prices"]["input_price"] == META_INPUT
        assert await self.balance_nanos(self.user_id) == before - expected
        await self.verify_ledger()

    async def test_a_variable_picks_the_model(self) -> None:
        dsl = ('route { when api_key.name == "batch" => call "gpt-big"; '
               'when user.balance < 50 => call "gpt-big"; otherwise => call "gpt-fake" }')
        await self.setup_meta(dsl, key_body={"name": "batch"})
        await self.chat("hi")
        other = await self.call("POST", "/api/user/api-keys", {"name": "interactive"},
                                token=self.user_token)
        client = self.openai_client(api_key=other.json()["api_key"])
        await self.in_thread(client.chat.completions.create, model="auto",
                             messages=[{"role": "user", "content": "hi"}])
        # the balance is read for programs that use it: below 50 goes big
        await self.set_balance(self.user_id, "40")
        await self.in_thread(client.chat.completions.create, model="auto",
                             messages=[{"role": "user", "content": "hi"}])
        assert self.upstream_models() == ["gpt-big", "gpt-fake", "gpt-big"]

    async def test_stream_through_a_meta_name(self) -> None:
        await self.setup_meta()
        client = self.openai_client()

        def run() -> list[Any]:
            return list(client.chat.completions.create(
                model="auto", messages=[{"role": "user", "content": LONG}], stream=True))

        chunks = await self.in_thread(run)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == TEXT
        assert self.upstream_models() == ["gpt-big"]
        (row,) = await self.usage_rows()
        assert row["is_stream"] and row["model_name"] == "gpt-big"
        prompt = count_prompt_tokens(self.fake.requests[0].body)
        assert row["cost_nanos"] == cost_nanos(prompt, 3, BIG_INPUT, BIG_OUTPUT)

    async def test_anthropic_sdk_plain_and_streamed(self) -> None:
        await self.setup_meta()
        client = anthropic.Anthropic(api_key=self.api_key, base_url=self.base, max_retries=0,
                                     timeout=20)
        self.addCleanup(client.close)
        reply = await self.in_thread(client.messages.create, model="auto", max_tokens=50,
                                     messages=[{"role": "user", "content": "hi"}])
        assert reply.content[0].text == TEXT

        def run() -> str:
            with client.messages.stream(model="auto", max_tokens=50,
                                        messages=[{"role": "user", "content": LONG}]) as s:
                return "".join(s.text_stream)

        assert await self.in_thread(run) == TEXT
        assert self.upstream_models() == ["gpt-fake", "gpt-big"]
        rows = await self.usage_rows()
        assert [r["model_name"] for r in rows] == ["gpt-fake", "gpt-big"]
        assert all(r["status"] == 0 and r["cost_nanos"] > 0 for r in rows)

    async def test_google_sdk_through_a_meta_name(self) -> None:
        await self.setup_meta()
        client = genai.Client(api_key=self.api_key, http_options=types.HttpOptions(
            base_url=self.base, timeout=20_000))
        self.addCleanup(client.close)
        reply = await self.in_thread(client.models.generate_content, model="auto",
                                     contents="hello there friend")
        assert reply.text == TEXT
        assert self.upstream_models() == ["gpt-fake"]
        (row,) = await self.usage_rows()
        assert row["model_name"] == "gpt-fake" and row["meta_model_name"] == "auto"


class AdmissionTests(MetaModelCase):
    async def test_reservation_covers_the_dearest_reachable_model(self) -> None:
        # 1000 output tokens: 2 units on gpt-fake, 200 on gpt-big (200,000 per 1M)
        await self.setup_meta(balance="10", big_output="200000")
        direct = await self.chat("hi", model="gpt-fake", max_tokens=1000)
        assert direct.status_code == 200
        with self.assertRaises(openai.APIStatusError) as caught:
            # resolves to the cheap model, but the program can reach the dear one
            await self.chat("hi", max_tokens=1000)
        assert caught.exception.status_code == 402
        assert self.upstream_models() == ["gpt-fake"]

    async def test_meta_mode_reserves_the_meta_price(self) -> None:
        await self.setup_meta(balance="10", big_output="200000", billing_mode="meta",
                              input_price=META_INPUT, output_price=META_OUTPUT)
        reply = await self.chat(LONG, max_tokens=1000)
        assert reply.status_code == 200  # 0.7 reserved at the meta price, not 200
        assert self.upstream_models() == ["gpt-big"]

    async def test_allowed_models_is_checked_against_the_meta_name(self) -> None:
        await self.setup_meta(key_body={"name": "k", "allowed_models": ["auto"]})
        await self.chat("hi")  # resolves to gpt-fake, which the key does not list
        with self.assertRaises(openai.PermissionDeniedError):
            await self.chat("hi", model="gpt-fake")
        other = await self.call("POST", "/api/user/api-keys",
                                {"name": "k2", "allowed_models": ["gpt-fake"]},
                                token=self.user_token)
        client = self.openai_client(api_key=other.json()["api_key"])
        with self.assertRaises(openai.PermissionDeniedError):
            await self.in_thread(client.chat.completions.create, model="auto",
                                 messages=[{"role": "user", "content": "hi"}])
        assert self.upstream_models() == ["gpt-fake"]

    async def test_disabled_or_deleted_meta_is_an_unknown_model(self) -> None:
        meta = await self.setup_meta()
        updated = await self.call("PUT", f"/api/meta-models/{meta['id']}",
                                  {"name": "auto", "dsl": BY_LENGTH, "enabled": False},
                                  token=self.admin_token)
        assert updated.status == 200, updated
        with self.assertRaises(openai.APIStatusError) as caught:
            await self.chat("hi")
        assert caught.exception.status_code == 503
        assert caught.exception.body["message"] == "No available channel for this model"
        await self.call("DELETE", f"/api/meta-models/{meta['id']}", token=self.admin_token)
        with self.assertRaises(openai.APIStatusError) as caught:
            await self.chat("hi")
        assert caught.exception.status_code == 503
        assert self.fake.request_count == 0


class EvaluationErrorTests(MetaModelCase):
    """A program that cannot decide answers 400 in each family's own error shape.  The admin
    routes refuse such programs, so the row is written the way an older release (or a hand
    edit) could have left it."""

    async def setUp_broken(self) -> None:
        await self.setup_meta()
        await self.catalog._insert(schema.meta_models, model_name="broken", name="broken",
                                   dsl='route { when request.text > 3 => call "gpt-big"\n'
                                       '  otherwise => call "gpt-fake" }')
        await self.catalog.announce()

    async def test_openai_family(self) -> None:
        await self.setUp_broken()
        with self.assertRaises(openai.BadRequestError) as caught:
            await self.chat("hi", model="broken")
        assert "Operator > requires number operands" in caught.exception.body["message"]
        assert caught.exception.response.headers["x-request-id"]
        assert self.fake.request_count == 0
        (row,) = await self.usage_rows()
        assert row["status"] == 400 and row["cost_nanos"] == 0

    async def test_messages_family(self) -> None:
        await self.setUp_broken()
        client = anthropic.Anthropic(api_key=self.api_key, base_url=self.base, max_retries=0,
                                     timeout=20)
        self.addCleanup(client.close)
        with self.assertRaises(anthropic.BadRequestError) as caught:
            await self.in_thread(client.messages.create, model="broken", max_tokens=5,
                                 messages=[{"role": "user", "content": "hi"}])
        body = caught.exception.body
        assert body["type"] == "error"
        assert "requires number operands" in body["error"]["message"]

    async def test_model_action_family(self) -> None:
        await self.setUp_broken()
        client = genai.Client(api_key=self.api_key, http_options=types.HttpOptions(
            base_url=self.base, timeout=20_000))
        self.addCleanup(client.close)
        with self.assertRaises(genai_errors.ClientError) as caught:
            await self.in_thread(client.models.generate_content, model="broken",
                                 contents="hi")
        assert caught.exception.code == 400
        assert caught.exception.status == "INVALID_ARGUMENT"
        assert self.fake.request_count == 0


class ListingTests(MetaModelCase):
    """Contract §0, "Meta models in listings"."""

    async def listings(self) -> dict[str, Any]:
        client = self.openai_client()
        v1 = [m.id for m in await self.in_thread(client.models.list)]
        public = (await self.call("GET", "/api/public/models")).json()
        catalog = (await self.call("GET", "/api/user/catalog", token=self.user_token)).json()
        pricing = (await self.call("GET", "/api/pricing")).json()["data"]
        return {"v1": v1, "public": {m["model_name"]: m for m in public},
                "catalog": catalog, "pricing": pricing}

    async def test_meta_models_are_listed_and_hide_what_they_are_told(self) -> None:
        await self.setup_meta(expose_referenced_models=False)
        await self.ctx.live_settings.save({"pricing_endpoint_enabled": "true"}, self.ctx.now())
        other = await self.catalog.model("gpt-other", input="1", output="1")
        await self.catalog.config(self.channel_id, other)
        await self.catalog.announce()
        seen = await self.listings()
        assert seen["v1"] == ["auto", "gpt-other"]
        assert sorted(seen["public"]) == ["auto", "gpt-other"]
        assert seen["catalog"]["models"] == ["auto", "gpt-other"]
        assert sorted(seen["pricing"]["input_price"]) == ["auto", "gpt-other"]
        auto = seen["public"]["auto"]
        assert auto["is_meta_model"] is True and auto["input_price"] is None
        assert auto["provider_name"] == "Meta Module" and auto["user_channels"] == []
        assert seen["catalog"]["prices"]["auto"]["input_price"] is None
        assert seen["pricing"]["input_price"]["auto"] is None
        # a second meta model (meta billing) exposes gpt-fake again: either one exposing wins
        pinned = await self.create_meta('call "gpt-fake"', name="pinned", billing_mode="meta",
                                        input_price=META_INPUT, output_price=META_OUTPUT)
        seen = await self.listings()
        assert seen["v1"] == ["auto", "gpt-fake", "gpt-other", "pinned"]
        assert sorted(seen["public"]) == ["auto", "gpt-fake", "gpt-other", "pinned"]
        assert seen["public"]["pinned"]["input_price"] == META_INPUT
        assert seen["public"]["pinned"]["output_price"] == META_OUTPUT
        assert seen["catalog"]["prices"]["pinned"]["output_price"] == META_OUTPUT
        # /api/pricing halves token prices (its exposure convention), meta ones too
        assert seen["pricing"]["input_price"]["pinned"] == "250"
        assert "gpt-big" not in seen["pricing"]["base_input_price"]
        # hidden, yet callable by name
        assert (await self.chat("hi", model="gpt-big")).status_code == 200
        # a disabled meta model is in no listing, and no longer hides anything
        await self.call("PUT", f"/api/meta-models/{pinned['id']}",
                        {"name": "pinned", "dsl": 'call "gpt-fake"', "enabled": False},
                        token=self.admin_token)
        seen = await self.listings()
        assert seen["v1"] == ["auto", "gpt-other"]
        assert "pinned" not in seen["public"] and "pinned" not in seen["catalog"]["prices"]
        assert "pinned" not in seen["pricing"]["input_price"]
