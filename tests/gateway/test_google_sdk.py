"""The official ``google-genai`` SDK against Lockgate, on each text channel type.

The SDK is pointed at the gateway with ``http_options.base_url`` and sends our API key as
``x-goog-api-key``; it calls ``/v1beta/models/<model>:generateContent`` and
``:streamGenerateContent?alt=sse``.  The same suite (plain, streamed, tools, typed errors) runs
against ``compat``, ``messages`` and ``modelaction`` channels, then the ``openai`` SDK against
a ``modelaction`` channel, and the billing equality of translated and native streams.
"""

from __future__ import annotations

import time
from typing import Any

import openai
import orjson
from google import genai
from google.genai import errors, types
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater

from tests.gateway.test_anthropic_sdk import (
    ARGUMENTS,
    TEXT,
    TOKEN_COLUMNS,
    USAGE_3_WORDS,
    NativeGatewayCase,
)

WEATHER = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="weather", description="Weather in a city",
    parameters_json_schema={"type": "object", "properties": {"location": {"type": "string"}}})])


class GoogleCase(NativeGatewayCase):
    def google_client(self, api_key: str | None = None) -> genai.Client:
        client = genai.Client(api_key=api_key or self.api_key, http_options=types.HttpOptions(
            base_url=self.base, timeout=20_000))
        self.addCleanup(client.close)
        return client

    async def setup_google(self, upstream_model: str = "", **kwargs: Any) -> None:
        await self.provision(model="gemini-fake", channel_type=self.channel_type,
                             upstream_model=upstream_model, **kwargs)


class _GoogleSuite:
    """The suite, mixed into one test case per channel type."""

    channel_type: str

    async def test_plain(self) -> None:
        await self.setup_google()
        client = self.google_client()
        reply = await self.in_thread(
            client.models.generate_content, model="gemini-fake", contents="hello there friend",
            config=types.GenerateContentConfig(system_instruction="be brief",
                                               max_output_tokens=100))
        assert reply.text == TEXT
        assert reply.model_version == "gemini-fake"
        assert reply.candidates[0].finish_reason == types.FinishReason.STOP
        rows = await self.usage_rows()
        assert rows[0]["status"] == 0
        assert rows[0]["endpoint"].endswith("/models/gemini-fake:generateContent")
        assert self.api_key not in repr(self.fake.requests[0].headers)

    async def test_stream(self) -> None:
        await self.setup_google()
        client = self.google_client()

        def run() -> list[Any]:
            return list(client.models.generate_content_stream(
                model="gemini-fake", contents="hello there friend"))

        chunks = await self.in_thread(run)
        assert "".join(c.text or "" for c in chunks) == TEXT
        expected = USAGE_3_WORDS[self.channel_type]
        assert await self.token_row() == expected
        last = chunks[-1]
        assert last.candidates[0].finish_reason == types.FinishReason.STOP
        usage = last.usage_metadata
        assert usage.prompt_token_count == expected[0]
        assert usage.candidates_token_count + (usage.thoughts_token_count or 0) == expected[1]

    async def test_tools(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+tools")
        client = self.google_client()
        config = types.GenerateContentConfig(tools=[WEATHER])
        reply = await self.in_thread(client.models.generate_content, model="gemini-fake",
                                     contents="weather in Paris?", config=config)
        call = reply.function_calls[0]
        assert call.name == "weather" and call.args == ARGUMENTS
        contents = [types.Content(role="user", parts=[types.Part(text="weather in Paris?")]),
                    reply.candidates[0].content,
                    types.Content(role="user", parts=[types.Part.from_function_response(
                        name="weather", response={"result": "sunny"})])]
        again = await self.in_thread(client.models.generate_content, model="gemini-fake",
                                     contents=contents, config=config)
        assert again.function_calls[0].name == "weather"
        assert self.fake.request_count == 2

    async def test_streamed_tools(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+tools")
        client = self.google_client()

        def run() -> list[Any]:
            return list(client.models.generate_content_stream(
                model="gemini-fake", contents="weather?",
                config=types.GenerateContentConfig(tools=[WEATHER])))

        chunks = await self.in_thread(run)
        calls = [c for chunk in chunks for c in chunk.function_calls or ()]
        assert len(calls) == 1 and calls[0].name == "weather" and calls[0].args == ARGUMENTS

    async def test_bad_key_is_401_unauthenticated(self) -> None:
        await self.setup_google()
        client = self.google_client(api_key="sk-not-a-real-key")
        with self.assertRaises(errors.ClientError) as caught:
            await self.in_thread(client.models.generate_content, model="gemini-fake",
                                 contents="x")
        assert caught.exception.code == 401 and caught.exception.status == "UNAUTHENTICATED"
        assert self.fake.request_count == 0

    async def test_model_not_allowed_is_permission_denied(self) -> None:
        await self.setup_google(key_body={"name": "k", "allowed_models": ["other"]})
        client = self.google_client()
        with self.assertRaises(errors.ClientError) as caught:
            await self.in_thread(client.models.generate_content, model="gemini-fake",
                                 contents="x")
        assert caught.exception.status == "PERMISSION_DENIED"
        assert self.fake.request_count == 0

    async def test_upstream_rate_limit_is_resource_exhausted(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+fail-429")
        client = self.google_client()
        with self.assertRaises(errors.ClientError) as caught:
            await self.in_thread(client.models.generate_content, model="gemini-fake",
                                 contents="x")
        assert caught.exception.code == 429
        assert caught.exception.status == "RESOURCE_EXHAUSTED"

    async def test_error_mid_stream_raises(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+error-mid-stream")
        client = self.google_client()

        def run() -> list[Any]:
            return list(client.models.generate_content_stream(model="gemini-fake",
                                                              contents="hi"))

        with self.assertRaises(errors.APIError):
            await self.in_thread(run)
        rows = await self.usage_rows()
        assert rows[0]["status"] == 502


class GoogleOnCompatTests(_GoogleSuite, GoogleCase):
    channel_type = "compat"


class GoogleOnMessagesTests(_GoogleSuite, GoogleCase):
    channel_type = "messages"


class GoogleOnModelActionTests(_GoogleSuite, GoogleCase):
    channel_type = "modelaction"

    async def test_passthrough_keeps_body_and_puts_upstream_model_in_path(self) -> None:
        await self.setup_google(upstream_model="gemini-up")
        client = self.google_client()
        config = types.GenerateContentConfig(temperature=0.5, top_k=7)
        reply = await self.in_thread(client.models.generate_content, model="gemini-fake",
                                     contents="hi", config=config)
        assert reply.model_version == "gemini-fake"
        sent = self.fake.requests[0]
        assert sent.path == "/v1beta/models/gemini-up:generateContent"
        assert sent.body["generationConfig"]["topK"] == 7 and "model" not in sent.body
        assert sent.headers["x-goog-api-key"] == "up-key"


class ModelActionRouteTests(GoogleCase):
    channel_type = "modelaction"

    async def _post(self, path: str) -> Any:
        return await self.call("POST", path, {"contents": [{"role": "user",
                                                            "parts": [{"text": "hi"}]}]})

    async def test_query_key_v1_path_and_unknown_action(self) -> None:
        await self.setup_google()
        ok = await self._post(f"/v1/models/models/gemini-fake:generateContent?key={self.api_key}")
        assert ok.status == 200, ok
        answer = ok.json()
        assert answer["candidates"][0]["content"]["parts"][0]["text"] == TEXT
        unknown = await self._post(f"/v1beta/models/gemini-fake:explode?key={self.api_key}")
        assert unknown.status == 404
        assert unknown.json()["error"]["status"] == "NOT_FOUND"
        malformed = await self._post(f"/v1beta/models/:generateContent?key={self.api_key}")
        assert malformed.status == 404
        # authentication comes first: a bad key on a bad action is still a 401
        refused = await self._post("/v1beta/models/gemini-fake:explode?key=wrong")
        assert refused.status == 401
        assert self.fake.request_count == 1
        rows = await self.usage_rows()
        assert all(self.api_key not in r["endpoint"] + r["error_message"] for r in rows)


class GoogleStreamFramingTests(GoogleCase):
    """``streamGenerateContent`` without ``alt=sse`` is a streamed JSON array; idle streams
    get a bare-newline heartbeat, which the google-genai SDK reads past."""

    channel_type = "compat"

    async def until_the_stream_beats(self) -> None:
        """Wait (real time) until the relay has its heartbeat timer on the test clock: only then
        does advancing the clock make a heartbeat (a fixed real-time wait was flaky under
        load: the stream had not started yet)."""
        deadline = time.monotonic() + 30
        while not any(getattr(call.func, "__name__", "") == "_beat"
                      for call in self.clock.getDelayedCalls()):
            assert time.monotonic() < deadline, "the stream never started"
            await deferLater(reactor, 0.01, lambda: None)

    async def test_json_array_stream_with_heartbeat(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+pace-0.2")
        body = {"contents": [{"role": "user", "parts": [{"text": "hello there friend"}]}]}
        pending = ensureDeferred(self.call(
            "POST", "/v1beta/models/gemini-fake:streamGenerateContent",
            body, headers={"x-goog-api-key": self.api_key}))
        await self.until_the_stream_beats()
        self.clock.advance(self.gateway.timeouts.heartbeat + 1)
        answer = await pending
        assert answer.status == 200
        assert answer.header("content-type").startswith("application/json")
        assert answer.body.startswith(b"[") and b"}\n,\n{" in answer.body  # the heartbeat
        chunks = orjson.loads(answer.body)
        assert "".join(p.get("text", "") for c in chunks
                       for p in c["candidates"][0]["content"]["parts"]) == TEXT
        assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        assert chunks[-1]["usageMetadata"]["promptTokenCount"] == 3
        rows = await self.usage_rows()
        assert rows[0]["is_stream"] and rows[0]["output_tokens"] == 3

    async def test_sdk_reads_past_the_heartbeat(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+pace-0.2")
        client = self.google_client()
        pending = self.in_thread(lambda: list(client.models.generate_content_stream(
            model="gemini-fake", contents="hi")))
        await self.until_the_stream_beats()
        self.clock.advance(self.gateway.timeouts.heartbeat + 1)
        chunks = await pending
        assert "".join(c.text or "" for c in chunks) == TEXT


class OpenAIOnModelActionTests(GoogleCase):
    channel_type = "modelaction"

    async def test_chat_plain_stream_tools_and_errors(self) -> None:
        await self.setup_google()
        client = self.openai_client()
        reply = await self.in_thread(
            client.chat.completions.create, model="gemini-fake",
            messages=[{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "hello there friend"}])
        assert reply.choices[0].message.content == TEXT
        assert reply.usage is not None and reply.usage.completion_tokens == 5
        assert self.fake.requests[0].body["systemInstruction"] == {"parts": [{"text": "be brief"}]}

        def stream() -> list[Any]:
            return list(client.chat.completions.create(
                model="gemini-fake", messages=[{"role": "user", "content": "hi"}],
                stream=True, stream_options={"include_usage": True}))

        chunks = await self.in_thread(stream)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == TEXT
        assert [c.usage.completion_tokens for c in chunks if c.usage] == [5]

        def responses_stream() -> list[Any]:
            return list(client.responses.create(model="gemini-fake", input="hi", stream=True))

        events = await self.in_thread(responses_stream)
        assert events[-1].type == "response.completed"
        assert events[-1].response.output_text == TEXT

    async def test_chat_tools(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+tools")
        client = self.openai_client()
        tools = [{"type": "function", "function": {"name": "weather", "parameters": {
            "type": "object", "properties": {}}}}]
        reply = await self.in_thread(client.chat.completions.create, model="gemini-fake",
                                     messages=[{"role": "user", "content": "w?"}], tools=tools)
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "weather"
        assert orjson.loads(call.function.arguments) == ARGUMENTS
        assert reply.choices[0].finish_reason == "tool_calls"
        declaration = self.fake.requests[0].body["tools"][0]["functionDeclarations"][0]
        assert declaration["name"] == "weather"

    async def test_chat_errors_are_typed(self) -> None:
        await self.setup_google(upstream_model="gemini-fake+fail-429")
        with self.assertRaises(openai.AuthenticationError):
            await self.in_thread(self.openai_client(api_key="sk-wrong").chat.completions.create,
                                 model="gemini-fake", messages=[{"role": "user", "content": "x"}])
        with self.assertRaises(openai.RateLimitError):
            await self.in_thread(self.openai_client().chat.completions.create,
                                 model="gemini-fake", messages=[{"role": "user", "content": "x"}])
        assert self.fake.request_count == 1


class TranslatedGoogleStreamBillingTests(GoogleCase):
    """On a ``modelaction`` channel the google-genai (native), anthropic and openai streams of
    one conversation record the same usage and cost."""

    channel_type = "modelaction"

    async def test_same_usage_and_cost(self) -> None:
        await self.setup_google()
        await self.catalog.config(self.channel_id, await self.catalog.model(
            "claude-fake", input="1000", output="2000"))
        await self.catalog.announce()
        google, claude, chat = (self.google_client(), self.anthropic_client(),
                                self.openai_client())
        words = "one two three four"

        def native() -> None:
            list(google.models.generate_content_stream(model="gemini-fake", contents=words))

        def via_messages() -> None:
            with claude.messages.stream(model="claude-fake", max_tokens=50,
                                        messages=[{"role": "user", "content": words}]) as s:
                s.until_done()

        def via_chat() -> None:
            list(chat.chat.completions.create(model="gemini-fake", stream=True,
                                              messages=[{"role": "user", "content": words}]))

        for call in (native, via_messages, via_chat):
            await self.in_thread(call)
        rows = await self.usage_rows()
        columns = (*TOKEN_COLUMNS, "cost_nanos")
        assert rows[0]["input_tokens"] == 4 and rows[0]["output_tokens"] == 5
        assert rows[0]["cached_input_tokens"] == 1 and rows[0]["cost_nanos"] > 0
        assert len({tuple(r[c] for c in columns) for r in rows}) == 1
        assert all(r["is_stream"] for r in rows)
