"""The Streamable-HTTP MCP client against a real server built with the official ``mcp``
package (its own process; event-stream and JSON answers), and against scripted loopback
servers for what a well-behaved server never does: redirects, refusals, oversized or endless
answers, JSON-RPC errors and batches."""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.assistant.mcp_client import McpClient, McpError
from gateway.channels.safe_connect import guarded_agent
from gateway.settings.store import Settings
from tests.support.mcp_server import mcp_server

#: the guard is on and only the loopback address the test servers use is allowed
LOOPBACK_ONLY = Settings({"ssrf_protection_enabled": "true",
                          "ssrf_allow_private_networks": "false",
                          "ssrf_allowed_hosts": "127.0.0.1"})
STRICT = Settings({"ssrf_protection_enabled": "true", "ssrf_allow_private_networks": "false"})


def agent(settings: Settings = LOOPBACK_ONLY) -> Any:
    return guarded_agent(reactor, settings, connect_timeout=5)


class RealServerTests(TestCase):
    json_response = False

    def client(self, headers: str = "") -> McpClient:
        return McpClient(agent(), reactor, mcp_server(json_response=self.json_response).url,
                         headers)

    async def test_handshake_list_and_call(self) -> None:
        client = self.client()
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert {"add", "echo", "whoami", "fail", "big", "structured"} <= set(tools)
        assert tools["add"].description == "Add two integers."
        assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
        # the server keeps a session and refuses messages without its id
        assert client.session_id
        added = await client.call_tool("add", {"a": 2, "b": 40})
        assert (added.text, added.is_error) == ("42", False)
        echoed = await client.call_tool("echo", {"text": "héllo\nworld"})
        assert echoed.text == "héllo\nworld"

    async def test_configured_headers_are_sent(self) -> None:
        client = self.client('{"Authorization": "Bearer token-1"}')
        assert (await client.call_tool("whoami", {})).text == "Bearer token-1"
        lines = self.client("Authorization: Bearer token-2\n")
        assert (await lines.call_tool("whoami", {})).text == "Bearer token-2"

    async def test_a_failing_tool_is_an_error_result(self) -> None:
        result = await self.client().call_tool("fail", {"reason": "disk full"})
        assert result.is_error and "disk full" in result.text

    async def test_an_unknown_tool(self) -> None:
        result = await self.client().call_tool("nope", {})
        assert result.is_error and "nope" in result.text

    async def test_the_response_cap(self) -> None:
        client = self.client()
        fits = await client.call_tool("big", {"kib": 1024})
        assert len(fits.text) == 1024 * 1024
        with self.assertRaises(McpError) as caught:
            await client.call_tool("big", {"kib": 4200})
        assert str(caught.exception) == "mcp response exceeds 4194304 bytes"


class RealServerJsonTests(RealServerTests):
    json_response = True


class ScriptedMcp(Resource):
    """Answers each POST with the next scripted (status, headers, body) -- or never, for
    ``None``; with a fourth item the body is sent but the answer never ends -- and records
    what it was sent."""

    isLeaf = True

    def __init__(self, answers: list[Any]) -> None:
        super().__init__()
        self.answers = answers
        self.seen: list[tuple[bytes, dict[str, Any], dict[bytes, list[bytes]]]] = []
        self.open: list[Any] = []
        #: fires when a request that will never be answered has arrived
        self.held: Deferred[None] = Deferred()

    def render_POST(self, request: Any) -> Any:
        body = orjson.loads(request.content.read())
        headers = dict(request.requestHeaders.getAllRawHeaders())
        self.seen.append((request.path, body, headers))
        answer = self.answers.pop(0)
        if answer is None:
            self.open.append(request)
            self.held.callback(None)
            return NOT_DONE_YET
        status, extra, payload, *hold = answer
        request.setResponseCode(status)
        for name, value in extra.items():
            request.setHeader(name, value)
        body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        if hold:  # send this much, then keep the answer open
            request.write(body)
            self.open.append(request)
            self.held.callback(None)
            return NOT_DONE_YET
        return body


def rpc(request_id: int, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


JSON = {"content-type": "application/json"}
HANDSHAKE = [(200, {**JSON, "mcp-session-id": "s-1"}, rpc(1, {})), (202, {}, b"")]


class ScriptedServerTests(TestCase):
    def serve(self, answers: list[Any]) -> tuple[ScriptedMcp, str]:
        resource = ScriptedMcp(answers)
        port = reactor.listenTCP(0, Site(resource), interface="127.0.0.1")
        self.addCleanup(port.stopListening)

        def finish_open() -> None:
            for request in resource.open:
                if not request.finished and not request._disconnected:
                    request.finish()
        self.addCleanup(finish_open)
        return resource, f"http://127.0.0.1:{port.getHost().port}"

    async def test_wire_format_session_and_structured_fallback(self) -> None:
        stream = (b": comment\n\nevent: message\ndata: not json\n\n"
                  b"data: " + orjson.dumps(rpc(2, {"content": [], "structuredContent":
                                                     {"n": 3}, "isError": True})) + b"\n\n")
        server, base = self.serve([*HANDSHAKE,
                                   (200, {"content-type": "text/event-stream"}, stream)])
        client = McpClient(agent(), reactor, base + "/mcp", "X-Key: k")
        result = await client.call_tool("t", {"q": 1})
        assert (result.text, result.is_error) == ('{"n":3}', True)
        (_, init, first), (_, note, second), (_, call, third) = server.seen
        assert init["id"] == 1 and init["method"] == "initialize"
        assert init["params"] == {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "lockgate", "version": "1.0.0"}}
        assert note == {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert call == {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "t", "arguments": {"q": 1}}}
        assert first[b"Accept"] == [b"application/json, text/event-stream"]
        assert first[b"Mcp-Protocol-Version"] == [b"2025-06-18"]
        assert first[b"X-Key"] == [b"k"] and b"Mcp-Session-Id" not in first
        assert second[b"Mcp-Session-Id"] == third[b"Mcp-Session-Id"] == [b"s-1"]

    async def test_batch_answers_cursor_pages_and_missing_schema(self) -> None:
        page1 = [{"jsonrpc": "2.0", "method": "notifications/progress"},
                 rpc(2, {"tools": [{"name": "a"}], "nextCursor": "c2"})]
        server, base = self.serve([*HANDSHAKE, (200, JSON, page1),
                                   (200, JSON, rpc(3, {"tools": [{"name": "b",
                                                                  "description": "B"}]}))])
        tools = await McpClient(agent(), reactor, base).list_tools()
        assert [(t.name, t.description, t.input_schema) for t in tools] == [
            ("a", "", {"type": "object", "properties": {}}),
            ("b", "B", {"type": "object", "properties": {}})]
        assert server.seen[3][1]["params"] == {"cursor": "c2"}

    async def test_errors_are_reported_with_the_contract_texts(self) -> None:
        cases: list[tuple[Any, str]] = [
            ((500, {}, b"x" * 5000), "mcp server returned 500: " + "x" * 2048),
            ((200, JSON, {"jsonrpc": "2.0", "id": 2,
                          "error": {"code": -32601, "message": "no such method"}}),
             "mcp error -32601: no such method"),
            ((202, {}, b""), "mcp server sent no response"),
            ((200, {"content-type": "text/event-stream"}, b"data: {}\n\n"),
             "mcp event stream ended without a response"),
        ]
        for answer, message in cases:
            _server, base = self.serve([*HANDSHAKE, answer])
            with self.assertRaises(McpError) as caught:
                await McpClient(agent(), reactor, base).list_tools()
            assert str(caught.exception) == message

    async def test_redirects_are_followed_through_the_guard(self) -> None:
        server, base = self.serve([(307, {"location": "/moved"}, b""), *HANDSHAKE,
                                   (200, JSON, rpc(2, {"tools": []}))])
        assert await McpClient(agent(), reactor, base + "/mcp").list_tools() == []
        assert [path for path, _, _ in server.seen][:2] == [b"/mcp", b"/moved"]
        # a redirect to an address the guard refuses is never connected to
        for target in ("http://169.254.169.254/latest", "http://127.0.0.2:1/mcp",
                       "http://localhost:1/mcp"):
            _server, base = self.serve([(308, {"location": target}, b"")])
            with self.assertRaises(McpError) as caught:
                await McpClient(agent(), reactor, base).list_tools()
            assert str(caught.exception).startswith("mcp server address is not allowed"), \
                str(caught.exception)

    async def test_the_url_itself_is_guarded(self) -> None:
        server, base = self.serve([*HANDSHAKE])
        with self.assertRaises(McpError) as caught:
            await McpClient(agent(STRICT), reactor, base).list_tools()
        assert str(caught.exception).startswith("mcp server address is not allowed")
        assert server.seen == []  # nothing reached the loopback server

    async def test_one_deadline_per_exchange(self) -> None:
        clock = Clock()
        server, base = self.serve([None])
        pending = ensureDeferred(McpClient(agent(), clock, base).list_tools())
        await server.held  # the request is at the server, which never answers
        clock.advance(29.9)
        assert not pending.called
        clock.advance(0.2)
        with self.assertRaises(McpError) as caught:
            await pending
        assert str(caught.exception) == "mcp request timed out after 30s"

    async def test_the_deadline_covers_a_stream_that_never_ends(self) -> None:
        clock = Clock()
        server, base = self.serve([*HANDSHAKE, (200, {"content-type": "text/event-stream"},
                                                b": working\n\ndata: {}\n\n", "hold")])
        pending = ensureDeferred(McpClient(agent(), clock, base).list_tools())
        await server.held
        clock.advance(30)
        with self.assertRaises(McpError) as caught:
            await pending
        assert str(caught.exception) == "mcp request timed out after 30s"
