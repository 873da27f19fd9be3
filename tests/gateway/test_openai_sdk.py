"""The official ``openai`` SDK against a running Lockgate relaying to a fake upstream."""

from __future__ import annotations

import openai

from tests.gateway.gateway_case import GatewayTestCase, expected_cost_nanos
from tests.support.upstream import count_prompt_tokens


class OpenAISDKChatTests(GatewayTestCase):
    async def test_chat_plain_is_relayed_and_billed_exactly(self) -> None:
        await self.provision()
        before = await self.balance_nanos(self.user_id)
        client = self.openai_client()
        messages = [{"role": "user", "content": "hello there friend"}]
        reply = await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                     messages=messages)
        assert reply.choices[0].message.content == "tok0 tok1 tok2 "
        assert reply.model == "gpt-fake"
        prompt = count_prompt_tokens({"model": "gpt-fake", "messages": messages})
        assert reply.usage.prompt_tokens == prompt
        rows = await self.usage_rows()
        assert len(rows) == 1 and rows[0]["status"] == 0
        assert rows[0]["input_tokens"] == prompt and rows[0]["output_tokens"] == 3
        cost = expected_cost_nanos(prompt, 3)
        assert rows[0]["cost_nanos"] == cost
        assert await self.balance_nanos(self.user_id) == before - cost
        assert await self.ledger_sum(self.user_id) == -cost
        # the upstream got our key and the model, never the client's key
        sent = self.fake.requests[0]
        assert sent.headers.get("authorization") == "Bearer up-key"
        assert self.api_key not in repr(sent.headers)

    async def test_chat_stream_without_usage_request_hides_usage_chunk(self) -> None:
        await self.provision()
        client = self.openai_client()

        def run() -> list:
            return list(client.chat.completions.create(
                model="gpt-fake", messages=[{"role": "user", "content": "hi"}], stream=True))

        chunks = await self.in_thread(run)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "tok0 tok1 tok2 "
        assert all(c.usage is None for c in chunks)
        # the upstream was asked for usage anyway, so billing is exact
        assert self.fake.requests[0].body["stream_options"] == {"include_usage": True}
        rows = await self.usage_rows()
        assert rows[0]["output_tokens"] == 3 and rows[0]["is_stream"]
        prompt = rows[0]["input_tokens"]
        assert rows[0]["cost_nanos"] == expected_cost_nanos(prompt, 3)

    async def test_chat_stream_with_usage_request_shows_usage(self) -> None:
        await self.provision()
        client = self.openai_client()

        def run() -> list:
            return list(client.chat.completions.create(
                model="gpt-fake", messages=[{"role": "user", "content": "hi"}], stream=True,
                stream_options={"include_usage": True}))

        chunks = await self.in_thread(run)
        usage = [c.usage for c in chunks if c.usage is not None]
        assert len(usage) == 1 and usage[0].completion_tokens == 3

    async def test_chat_tool_call(self) -> None:
        await self.provision(upstream_model="gpt-fake+tools")
        client = self.openai_client()
        tools = [{"type": "function", "function": {
            "name": "weather", "parameters": {"type": "object", "properties": {}}}}]
        reply = await self.in_thread(
            client.chat.completions.create, model="gpt-fake",
            messages=[{"role": "user", "content": "weather?"}], tools=tools)
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name
        assert reply.choices[0].finish_reason == "tool_calls"

    async def test_models_lists_reachable_models(self) -> None:
        await self.provision()
        client = self.openai_client()
        page = await self.in_thread(client.models.list)
        assert [m.id for m in page.data] == ["gpt-fake"]


class OpenAISDKErrorTests(GatewayTestCase):
    async def test_bad_key_is_authentication_error(self) -> None:
        await self.provision()
        client = self.openai_client(api_key="sk-not-a-real-key")
        with self.assertRaises(openai.AuthenticationError):
            await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                 messages=[{"role": "user", "content": "x"}])
        assert self.fake.request_count == 0

    async def test_model_not_allowed_is_permission_denied(self) -> None:
        await self.provision(key_body={"name": "k", "allowed_models": ["other-model"]})
        client = self.openai_client()
        with self.assertRaises(openai.PermissionDeniedError):
            await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                 messages=[{"role": "user", "content": "x"}])
        assert self.fake.request_count == 0

    async def test_rate_limit_is_rate_limit_error(self) -> None:
        await self.provision()
        await self.ctx.live_settings.save({"rate_limit_requests_per_minute": "1",
                                           "rate_limit_burst": "0"}, self.ctx.now())
        client = self.openai_client()
        await self.in_thread(client.chat.completions.create, model="gpt-fake",
                             messages=[{"role": "user", "content": "x"}])
        with self.assertRaises(openai.RateLimitError):
            await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                 messages=[{"role": "user", "content": "x"}])
        assert self.fake.request_count == 1

    async def test_insufficient_balance_is_402(self) -> None:
        await self.provision(balance="0")
        client = self.openai_client()
        with self.assertRaises(openai.APIStatusError) as caught:
            await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                 messages=[{"role": "user", "content": "x"}])
        assert caught.exception.status_code == 402
        assert self.fake.request_count == 0

    async def test_unknown_model_is_503_without_upstream_call(self) -> None:
        await self.provision()
        client = self.openai_client()
        with self.assertRaises(openai.APIStatusError) as caught:
            await self.in_thread(client.chat.completions.create, model="nope",
                                 messages=[{"role": "user", "content": "x"}])
        assert caught.exception.status_code == 503
        assert self.fake.request_count == 0
