"""Token-level ``text`` streaming of chat completions and assistant runs (agents contract §1.7
the SSE table, §1.8 step 7, §1.10, [P-8]).

With ``stream=true`` every model round is a streamed internal /v1 call: the loopback upstream
answers real OpenAI chat SSE (one word per chunk, tool-call arguments in fragments), the
gateway's own streaming path relays it, and the assistant reads it as it arrives.  Each test
compares the answer's cost with the usage-log rows, so streaming cannot bypass settlement.
"""

from __future__ import annotations

import socket
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from gateway.assistant.text_deltas import TextDeltas
from tests.console.test_assistant_completions import (
    SKILL_BODY,
    AssistantCase,
    cost_nanos,
    sse_events,
)
from tests.support.tool_upstream import broken, failure, stalled, text, tool_call, words


def read_then_hang_up(port: int, token: str, body: dict[str, Any], texts: int) -> bytes:
    """A raw HTTP client in a thread: POST a streamed chat completion, read until ``texts``
    ``text`` events arrived, then close the socket (a browser tab closed mid-answer)."""
    payload = orjson.dumps(body)
    request = (b"POST /api/user/advanced-chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Authorization: Bearer " + token.encode() + b"\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(payload)).encode() + b"\r\nConnection: close\r\n\r\n" + payload)
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    data = b""
    try:
        sock.sendall(request)
        while data.count(b"event: text\n") < texts:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    return data


class ChatStreamingTests(AssistantCase):
    async def test_chat_sse_sends_each_streamed_delta_in_order_before_done(self) -> None:
        await self.provision()
        answer_text = "The quick brown fox jumps."
        self.upstream.script(text(answer_text))
        answer = await self.complete({"messages": [{"role": "user", "content": "go"}],
                                      "stream": True})
        assert answer.status == 200, answer
        assert self.upstream.requests[0]["stream"] is True
        events = sse_events(answer.body)
        assert [name for name, _ in events] == [
            "status", "status", "status", *["text"] * len(words(answer_text)), "done"]
        assert [data for name, data in events if name == "text"] == [
            {"delta": "The "}, {"delta": "quick "}, {"delta": "brown "}, {"delta": "fox "},
            {"delta": "jumps."}]
        # §1.7's wire: event line, one-line JSON data, blank line; no ``round`` when streamed
        assert b'event: text\ndata: {"delta":"quick "}\n\n' in answer.body
        done = events[-1][1]
        assert done["message"] == {"role": "assistant", "content": answer_text,
                                   "content_parts": [{"round": 1, "content": answer_text}]}
        rows = await self.usage_rows()
        assert len(rows) == 1 and rows[0]["is_stream"]
        assert cost_nanos(done["cost"]) == rows[0]["cost_nanos"] > 0
        await self.verify_ledger()

    async def test_a_client_hang_up_mid_stream_ends_the_upstream_and_bills_once(self) -> None:
        await self.provision()
        long_answer = " ".join(f"word{n}" for n in range(200))
        self.upstream.chunk_delay = 0.02  # about 4 s of stream: the client leaves early
        self.upstream.script(text(long_answer))
        body = {"model": "gpt-fake", "messages": [{"role": "user", "content": "x"}],
                "stream": True}
        received = await self.in_thread(read_then_hang_up, self.port.getHost().port,
                                        self.user_token, body, 2)
        assert b'event: text\ndata: {"delta":"word0 "}\n\n' in received
        [upstream] = self.upstream.streams
        for _ in range(500):  # the next write finds the client gone
            if getattr(upstream, "_disconnected", False):
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert upstream._disconnected and not upstream.finished  # closed mid-stream
        for _ in range(500):
            rows = await self.usage_rows()
            if rows:
                break
            await deferLater(reactor, 0.02, lambda: None)
        await deferLater(reactor, 0.1, lambda: None)
        rows = await self.usage_rows()
        assert len(rows) == 1, rows  # settled once, for what was delivered
        assert 0 < rows[0]["output_tokens"] < 200 and rows[0]["cost_nanos"] > 0
        await self.verify_ledger()

    async def test_tool_calls_split_across_chunks_run_with_their_merged_arguments(self) -> None:
        await self.provision()
        skill_id = await self.skill()
        first = tool_call("activate_skill", {"skill_id": skill_id}, "call_a")
        second = tool_call("activate_skill", {"skill_id": skill_id, "note": "again"}, "call_b")
        both = {"content": "Let me look.",
                "tool_calls": first["tool_calls"] + second["tool_calls"]}
        self.upstream.script(both)
        answer = await self.complete({"messages": [{"role": "user", "content": "go"}],
                                      "skill_ids": [skill_id], "stream": True})
        events = sse_events(answer.body)
        details = [data for name, data in events if name == "tool_call"]
        assert [(d["id"], d["status"]) for d in details] == [
            ("call_a", "running"), ("call_a", "ok"), ("call_b", "running"), ("call_b", "ok")]
        assert details[1]["arguments"] == {"skill_id": skill_id}
        assert details[3]["arguments"] == {"skill_id": skill_id, "note": "again"}
        assert details[1]["result"] == SKILL_BODY
        # round 1's text streamed before its tool calls; round 2 saw the assembled calls
        names = [name for name, _ in events]
        assert names.index("text") < names.index("tool_call")
        assert "".join(data["delta"] for name, data in events[:names.index("tool_call")]
                       if name == "text") == "Let me look."
        replayed = self.upstream.requests[1]["messages"]
        assert replayed[-3]["tool_calls"] == [
            {"id": "call_a", "type": "function",
             "function": {"name": "activate_skill",
                          "arguments": orjson.dumps({"skill_id": skill_id}).decode()}},
            {"id": "call_b", "type": "function",
             "function": {"name": "activate_skill",
                          "arguments": orjson.dumps({"skill_id": skill_id,
                                                     "note": "again"}).decode()}}]
        rows = await self.usage_rows()
        assert len(rows) == 2
        assert cost_nanos(events[-1][1]["cost"]) == sum(r["cost_nanos"] for r in rows)


class RunStreamingTests(AssistantCase):
    async def run_text_events(self, run_id: str) -> list[dict[str, Any]]:
        return [e["payload"] for e in await self.events(run_id) if e["event"] == "text"]

    async def test_a_streamed_run_persists_its_deltas_as_text_events(self) -> None:
        await self.provision()
        answer_text = "one two three four five six"
        self.upstream.chunk_delay = 0.02  # each chunk in its own reactor turn
        self.upstream.script(text(answer_text))
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant", "stream": True})
        assert started.status == 202, started
        finished = await self.wait_for_run(started.json()["run"]["id"])
        assert finished["status"] == "completed", finished
        texts = await self.run_text_events(finished["id"])
        # run events carry the round (§1.10); deltas of one reactor turn may share an event
        assert len(texts) >= 2, texts
        assert all(set(t) == {"delta", "round"} and t["round"] == 1 for t in texts)
        assert "".join(t["delta"] for t in texts) == answer_text
        events = await self.events(finished["id"])
        assert [e["event"] for e in events][-1] == "done"
        assert events[-1]["payload"]["message"]["content"] == answer_text
        count, total = await self.usage_cost()
        assert count == 1 and cost_nanos(finished["cost"]) == total > 0

    async def test_a_failure_before_the_first_byte_retries_as_before(self) -> None:
        await self.provision()
        self.upstream.script(failure(503), text("after the retry"))
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant", "stream": True})
        run_id = started.json()["run"]["id"]
        for _ in range(1500):  # ~30 s: the machine may be busy
            if any(e["payload"].get("message") == "retrying" for e in await self.events(run_id)):
                break
            await deferLater(reactor, 0.02, lambda: None)
        self.clock.advance(0.5)  # the first retry delay
        finished = await self.wait_for_run(run_id)
        assert finished["status"] == "completed", finished
        events = await self.events(run_id)
        retry = [e["payload"] for e in events if e["payload"].get("message") == "retrying"]
        assert retry == [{"message": "retrying", "attempt": 1, "max": 10,
                          "error": "Upstream request failed", "status": 502,
                          "model": "gpt-fake"}]
        assert "".join(t["delta"] for t in await self.run_text_events(run_id)) == \
            "after the retry"
        rows = await self.usage_rows()
        assert cost_nanos(finished["cost"]) == sum(r["cost_nanos"] for r in rows) > 0

    async def test_a_failure_after_streamed_text_fails_the_run_without_a_retry(self) -> None:
        """§1.8 step 7: retries only while no text has been streamed -- the error is one a
        retry would otherwise follow (``Upstream request failed``)."""
        await self.provision()
        self.upstream.script(broken("some words ", "Upstream request failed"))
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant", "stream": True})
        finished = await self.wait_for_run(started.json()["run"]["id"])
        assert (finished["status"], finished["error_message"]) == (
            "failed", "Upstream request failed"), finished
        events = await self.events(finished["id"])
        assert not any(e["payload"].get("message") == "retrying" for e in events)
        assert "".join(t["delta"] for t in await self.run_text_events(finished["id"])) == \
            "some words "
        assert events[-1] == {**events[-1], "event": "error",
                              "payload": {"error": "Upstream request failed"}}
        assert len(self.upstream.requests) == 1
        rows = await self.usage_rows()
        assert len(rows) == 1 and cost_nanos(finished["cost"]) == rows[0]["cost_nanos"]

    async def test_stop_mid_stream_ends_the_upstream_and_settles_once(self) -> None:
        await self.provision()
        self.upstream.script(stalled("half of an answer"))
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant", "stream": True})
        run = started.json()["run"]
        await self.upstream.stalled
        for _ in range(1500):  # the delivered text is persisted
            texts = await self.run_text_events(run["id"])
            if "".join(t["delta"] for t in texts) == "half of an answer":
                break
            await deferLater(reactor, 0.02, lambda: None)
        stopped = await self.call("POST", f"/api/user/advanced-chat/runs/{run['id']}/stop",
                                  token=self.user_token)
        assert stopped.json()["status"] == "cancelled", stopped
        [hanging] = self.upstream.hanging
        for _ in range(500):
            if getattr(hanging, "_disconnected", False):
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert hanging._disconnected  # the upstream stream was closed at once
        for _ in range(1500):  # the worker records the settled cost after the cancel
            found = (await self.call("GET", f"/api/user/advanced-chat/runs/{run['id']}",
                                     token=self.user_token)).json()
            rows = await self.usage_rows()
            if rows and cost_nanos(found["cost"]) > 0:
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert len(rows) == 1, rows  # settled exactly once, for what was delivered
        assert rows[0]["cost_nanos"] > 0
        assert cost_nanos(found["cost"]) == rows[0]["cost_nanos"]
        assert found["status"] == "cancelled"
        events = await self.events(run["id"])
        assert events[-1]["payload"] == {"message": "cancelled"}
        await self.verify_ledger()


class RunStreamingPostgresTests(RunStreamingTests):
    """The same streamed runs on PostgreSQL (text events in group commits, settlement)."""

    backend = "postgresql"


class _Recorded:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        self.events.append((event, payload))


class TextDeltasTests(TestCase):
    async def test_deltas_of_one_reactor_turn_become_one_event(self) -> None:
        sink = _Recorded()
        deltas = TextDeltas(sink, 3, with_round=True, reactor=reactor)
        for piece in ("a", "b", "c"):
            deltas.add(piece)
        assert sink.events == []  # not before the turn ends
        await deferLater(reactor, 0.01, lambda: None)
        deltas.add("d")
        await deltas.close()
        assert sink.events == [("text", {"delta": "abc", "round": 3}),
                               ("text", {"delta": "d", "round": 3})]
        assert (deltas.received, deltas.events) == (4, 2)

    async def test_without_a_reactor_each_delta_goes_out_at_once(self) -> None:
        sink = _Recorded()
        deltas = TextDeltas(sink, 1, with_round=False)
        deltas.add("a")
        deltas.add("b")
        assert sink.events == [("text", {"delta": "a"}), ("text", {"delta": "b"})]
        await deltas.close()
