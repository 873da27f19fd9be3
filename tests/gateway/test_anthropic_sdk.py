"""The official ``anthropic`` SDK against Lockgate, on each text channel type.

The same suite (plain, streamed, tools, typed errors) runs against a ``compat`` channel
(Messages <-> chat conversion), a ``messages`` channel (native passthrough) and a
``modelaction`` channel (Messages <-> Google conversion); the upstream is a real loopback fake
speaking each native protocol (``tests.support.upstream_google.NativeUpstream``).  Also here:
the ``openai`` SDK against ``messages`` channels, and the billing equality of a translated
stream with the same call made natively.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
from twisted.internet import reactor

from tests.gateway.gateway_case import GatewayTestCase
from tests.support.upstream import TOOL_ARGUMENT_PIECES
from tests.support.upstream_google import NativeUpstream

TEXT = "tok0 tok1 tok2 "
TOOLS = [{"name": "weather", "description": "Weather in a city",
          "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]
ARGUMENTS = {"location": "Paris", "unit": "c"}
assert "".join(TOOL_ARGUMENT_PIECES) == '{"location": "Paris", "unit": "c"}'

#: what each fake upstream reports for a 3-word prompt and 3 content chunks (see the fakes):
#: (input, output, cache read, cache write 5m) as the usage log records them
USAGE_3_WORDS = {"compat": (3, 3, 0, 0), "messages": (3, 3, 2, 1), "modelaction": (3, 5, 1, 0)}
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cached_input_tokens",
                 "cache_write_input_tokens")


class NativeGatewayCase(GatewayTestCase):
    """A gateway whose fake upstream also speaks Messages and Google natively."""

    channel_type = "compat"

    def setUp(self) -> None:
        super().setUp()
        self.fake = NativeUpstream.start(reactor)
        self.addCleanup(self.fake.stop)

    def anthropic_client(self, api_key: str | None = None) -> anthropic.Anthropic:
        client = anthropic.Anthropic(api_key=api_key or self.api_key, base_url=self.base,
                                     max_retries=0, timeout=20)
        self.addCleanup(client.close)
        return client

    async def setup_channel(self, upstream_model: str = "", **kwargs: Any) -> None:
        await self.provision(model="claude-fake", channel_type=self.channel_type,
                             upstream_model=upstream_model, **kwargs)

    async def token_row(self) -> tuple[int, ...]:
        rows = await self.usage_rows()
        assert len(rows) == 1, rows
        return tuple(rows[0][c] for c in TOKEN_COLUMNS)


class _AnthropicSuite:
    """The suite, mixed into one test case per channel type."""

    channel_type: str

    async def test_plain(self) -> None:
        await self.setup_channel()
        client = self.anthropic_client()
        reply = await self.in_thread(
            client.messages.create, model="claude-fake", max_tokens=100,
            system="be brief", messages=[{"role": "user", "content": "hello there friend"}])
        assert reply.content[0].text == TEXT
        assert reply.model == "claude-fake"
        assert reply.stop_reason == "end_turn"
        rows = await self.usage_rows()
        assert rows[0]["status"] == 0 and rows[0]["output_tokens"] >= 3
        assert rows[0]["endpoint"] == "/v1/messages"
        sent = self.fake.requests[0]
        assert self.api_key not in repr(sent.headers)

    async def test_stream(self) -> None:
        await self.setup_channel()
        client = self.anthropic_client()

        def run() -> tuple[str, Any]:
            with client.messages.stream(
                    model="claude-fake", max_tokens=100,
                    messages=[{"role": "user", "content": "hello there friend"}]) as stream:
                text = "".join(stream.text_stream)
                return text, stream.get_final_message()

        text, final = await self.in_thread(run)
        assert text == TEXT
        assert final.stop_reason == "end_turn" and final.model == "claude-fake"
        expected = USAGE_3_WORDS[self.channel_type]
        assert await self.token_row() == expected
        # the client sees the same counts, in the Messages convention
        assert final.usage.output_tokens == expected[1]
        assert final.usage.cache_read_input_tokens == expected[2]
        assert (final.usage.input_tokens + final.usage.cache_read_input_tokens
                + final.usage.cache_creation_input_tokens) == expected[0]

    async def test_tools(self) -> None:
        await self.setup_channel(upstream_model="claude-fake+tools")
        client = self.anthropic_client()
        messages: list[dict[str, Any]] = [{"role": "user", "content": "weather in Paris?"}]
        reply = await self.in_thread(client.messages.create, model="claude-fake",
                                     max_tokens=100, messages=messages, tools=TOOLS)
        assert reply.stop_reason == "tool_use"
        call = next(b for b in reply.content if b.type == "tool_use")
        assert call.name == "weather" and call.input == ARGUMENTS
        # the tool result goes back and is accepted
        messages += [{"role": "assistant", "content": [b.model_dump() for b in reply.content
                                                       if b.type == "tool_use"]},
                     {"role": "user", "content": [{"type": "tool_result",
                                                   "tool_use_id": call.id,
                                                   "content": "sunny"}]}]
        again = await self.in_thread(client.messages.create, model="claude-fake",
                                     max_tokens=100, messages=messages, tools=TOOLS)
        assert again.stop_reason == "tool_use"
        assert len(self.fake.requests) == 2

    async def test_streamed_tools(self) -> None:
        await self.setup_channel(upstream_model="claude-fake+tools")
        client = self.anthropic_client()

        def run() -> Any:
            with client.messages.stream(
                    model="claude-fake", max_tokens=100, tools=TOOLS,  # type: ignore[arg-type]
                    messages=[{"role": "user", "content": "weather?"}]) as stream:
                return stream.get_final_message()

        final = await self.in_thread(run)
        assert final.stop_reason == "tool_use"
        call = next(b for b in final.content if b.type == "tool_use")
        assert call.name == "weather" and call.input == ARGUMENTS

    async def test_bad_key_is_authentication_error(self) -> None:
        await self.setup_channel()
        client = self.anthropic_client(api_key="sk-not-a-real-key")
        with self.assertRaises(anthropic.AuthenticationError) as caught:
            await self.in_thread(client.messages.create, model="claude-fake", max_tokens=10,
                                 messages=[{"role": "user", "content": "x"}])
        assert caught.exception.body["error"]["type"] == "authentication_error"  # type: ignore[index]
        assert self.fake.request_count == 0

    async def test_model_not_allowed_is_permission_denied(self) -> None:
        await self.setup_channel(key_body={"name": "k", "allowed_models": ["other"]})
        client = self.anthropic_client()
        with self.assertRaises(anthropic.PermissionDeniedError):
            await self.in_thread(client.messages.create, model="claude-fake", max_tokens=10,
                                 messages=[{"role": "user", "content": "x"}])
        assert self.fake.request_count == 0

    async def test_upstream_rate_limit_is_rate_limit_error(self) -> None:
        await self.setup_channel(upstream_model="claude-fake+fail-429")
        client = self.anthropic_client()
        with self.assertRaises(anthropic.RateLimitError):
            await self.in_thread(client.messages.create, model="claude-fake", max_tokens=10,
                                 messages=[{"role": "user", "content": "x"}])

    async def test_bad_request_is_bad_request_error(self) -> None:
        await self.setup_channel()
        client = self.anthropic_client()
        with self.assertRaises(anthropic.BadRequestError):
            await self.in_thread(client.messages.create, model="claude-fake", max_tokens=10,
                                 messages=[])
        assert self.fake.request_count == 0

    async def test_error_mid_stream_raises(self) -> None:
        await self.setup_channel(upstream_model="claude-fake+error-mid-stream")
        client = self.anthropic_client()

        def run() -> str:
            with client.messages.stream(
                    model="claude-fake", max_tokens=100,
                    messages=[{"role": "user", "content": "hi"}]) as stream:
                return "".join(stream.text_stream)

        with self.assertRaises(anthropic.APIStatusError):
            await self.in_thread(run)
        rows = await self.usage_rows()
        assert rows[0]["status"] == 502


class AnthropicOnCompatTests(_AnthropicSuite, NativeGatewayCase):
    channel_type = "compat"


class AnthropicOnMessagesTests(_AnthropicSuite, NativeGatewayCase):
    channel_type = "messages"

    async def test_passthrough_sends_the_body_with_only_the_model_changed(self) -> None:
        await self.setup_channel(upstream_model="claude-up")
        client = self.anthropic_client()
        reply = await self.in_thread(
            client.messages.create, model="claude-fake", max_tokens=7,
            metadata={"user_id": "u1"}, messages=[{"role": "user", "content": "hi"}],
            extra_headers={"anthropic-beta": "tools-2024-05-16",
                           "anthropic-version": "2023-01-01"})
        assert reply.model == "claude-fake"
        sent = self.fake.requests[0]
        assert sent.path == "/v1/messages"
        assert sent.body["model"] == "claude-up" and sent.body["metadata"] == {"user_id": "u1"}
        assert sent.headers["x-api-key"] == "up-key"
        # the client's anthropic-version and anthropic-beta are forwarded (§6.1)
        assert sent.headers["anthropic-version"] == "2023-01-01"
        assert sent.headers["anthropic-beta"] == "tools-2024-05-16"


class AnthropicOnModelActionTests(_AnthropicSuite, NativeGatewayCase):
    channel_type = "modelaction"

    async def test_upstream_path_carries_model_and_alt_sse(self) -> None:
        await self.setup_channel(upstream_model="gemini-up")
        client = self.anthropic_client()

        def run() -> str:
            with client.messages.stream(
                    model="claude-fake", max_tokens=100,
                    messages=[{"role": "user", "content": "hi"}]) as stream:
                return "".join(stream.text_stream)

        assert await self.in_thread(run) == TEXT
        sent = self.fake.requests[0]
        assert sent.path == "/v1beta/models/gemini-up:streamGenerateContent"
        assert sent.query == b"alt=sse"
        assert sent.headers["x-goog-api-key"] == "up-key"
        assert "anthropic-version" not in sent.headers
        assert sent.body["generationConfig"] == {"maxOutputTokens": 100}


class OpenAIOnMessagesTests(NativeGatewayCase):
    channel_type = "messages"

    async def test_chat_plain_stream_tools_and_errors(self) -> None:
        await self.setup_channel()
        client = self.openai_client()
        reply = await self.in_thread(
            client.chat.completions.create, model="claude-fake",
            messages=[{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "hello there friend"}])
        assert reply.choices[0].message.content == TEXT
        assert reply.usage is not None and reply.usage.prompt_tokens == 5
        sent = self.fake.requests[0].body
        assert sent["system"] == "be brief" and sent["max_tokens"] > 0

        def stream() -> list[Any]:
            return list(client.chat.completions.create(
                model="claude-fake", messages=[{"role": "user", "content": "hi"}],
                stream=True, stream_options={"include_usage": True}))

        chunks = await self.in_thread(stream)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == TEXT
        assert [c.usage.completion_tokens for c in chunks if c.usage] == [3]
        bad = self.openai_client(api_key="sk-wrong")
        with self.assertRaises(openai.AuthenticationError):
            await self.in_thread(bad.chat.completions.create, model="claude-fake",
                                 messages=[{"role": "user", "content": "x"}])

    async def test_chat_tools(self) -> None:
        await self.setup_channel(upstream_model="claude-fake+tools")
        client = self.openai_client()
        tools = [{"type": "function", "function": {"name": "weather", "parameters": {
            "type": "object", "properties": {}}}}]

        def stream() -> list[Any]:
            return list(client.chat.completions.create(
                model="claude-fake", messages=[{"role": "user", "content": "w?"}],
                tools=tools, stream=True))  # type: ignore[arg-type]

        chunks = await self.in_thread(stream)
        pieces = [tc.function.arguments for c in chunks if c.choices
                  for tc in c.choices[0].delta.tool_calls or () if tc.function]
        assert "".join(p or "" for p in pieces) == "".join(TOOL_ARGUMENT_PIECES)
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        assert self.fake.requests[0].body["tools"][0]["name"] == "weather"

    async def test_chat_upstream_errors_are_typed(self) -> None:
        await self.setup_channel(upstream_model="claude-fake+fail-429")
        with self.assertRaises(openai.RateLimitError):
            await self.in_thread(self.openai_client().chat.completions.create,
                                 model="claude-fake", messages=[{"role": "user", "content": "x"}])
        with self.assertRaises(openai.BadRequestError):
            await self.in_thread(self.openai_client().chat.completions.create,
                                 model="claude-fake", messages=[{"role": "user", "content": [
                                     {"type": "input_audio", "input_audio": {
                                         "data": "AA==", "format": "wav"}}]}])
        assert self.fake.request_count == 1


class TranslatedStreamBillingTests(NativeGatewayCase):
    """A translated stream bills exactly what the same call made natively bills."""

    async def _rows_for(self, calls: list[Any]) -> list[dict[str, Any]]:
        for call in calls:
            await self.in_thread(call)
        rows = await self.usage_rows()
        assert len(rows) == len(calls)
        return rows

    async def test_messages_channel(self) -> None:
        self.channel_type = "messages"
        await self.setup_channel()
        native, chat = self.anthropic_client(), self.openai_client()
        words = "one two three four"

        def anthropic_stream() -> None:
            with native.messages.stream(model="claude-fake", max_tokens=50,
                                        messages=[{"role": "user", "content": words}]) as s:
                s.until_done()

        def openai_stream() -> None:
            list(chat.chat.completions.create(model="claude-fake", max_tokens=50, stream=True,
                                              messages=[{"role": "user", "content": words}]))

        rows = await self._rows_for([anthropic_stream, openai_stream])
        columns = (*TOKEN_COLUMNS, "cost_nanos")
        assert [r["is_stream"] for r in rows] == [True, True]
        assert rows[0]["cached_input_tokens"] == 2 and rows[0]["input_tokens"] == 4
        assert tuple(rows[0][c] for c in columns) == tuple(rows[1][c] for c in columns)
        assert rows[0]["cost_nanos"] > 0
