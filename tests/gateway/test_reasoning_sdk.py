"""Reasoning through the whole gateway, seen by the official SDKs (issue 5).

An ``anthropic`` client with thinking enabled and an ``openai`` Responses client asking for a
reasoning summary call a model served by a ``modelaction`` channel: the fake Google upstream
(``tests.support.upstream_google``) receives the mapped ``thinkingConfig`` and answers with a
thought part, which each SDK reads back in its own shape -- plain and streamed.  The usage log
shows the same counts as the native call would (thought tokens inside output), so billing is
unchanged by showing the reasoning.
"""

from __future__ import annotations

from typing import Any

from tests.gateway.test_anthropic_sdk import USAGE_3_WORDS, NativeGatewayCase
from tests.support.upstream_google import THOUGHT_PART

TEXT = "tok0 tok1 tok2 "
PROMPT = [{"role": "user", "content": "hello there friend"}]
THINKING = {"type": "enabled", "budget_tokens": 1024}


class ReasoningThroughModelActionTests(NativeGatewayCase):
    channel_type = "modelaction"

    def _sent_thinking(self) -> Any:
        return self.fake.requests[0].body["generationConfig"]["thinkingConfig"]

    async def test_anthropic_thinking_plain(self) -> None:
        await self.setup_channel()
        client = self.anthropic_client()
        reply = await self.in_thread(client.messages.create, model="claude-fake",
                                     max_tokens=2000, thinking=THINKING, messages=PROMPT)
        thinking, text = reply.content
        assert thinking.type == "thinking" and thinking.thinking == THOUGHT_PART["text"]
        assert thinking.signature == ""  # Google's signature is never handed on
        assert text.type == "text" and text.text == TEXT
        assert self._sent_thinking() == {"thinkingBudget": 1024, "includeThoughts": True}
        assert await self.token_row() == USAGE_3_WORDS["modelaction"]

    async def test_anthropic_thinking_streamed(self) -> None:
        await self.setup_channel()
        client = self.anthropic_client()

        def run() -> tuple[list[str], Any]:
            with client.messages.stream(model="claude-fake", max_tokens=2000,
                                        thinking=THINKING, messages=PROMPT) as stream:
                kinds = [event.type for event in stream]
                return kinds, stream.get_final_message()

        kinds, final = await self.in_thread(run)
        assert "thinking" in kinds  # the SDK's own thinking event
        assert [b.type for b in final.content] == ["thinking", "text"]
        assert final.content[0].thinking == THOUGHT_PART["text"]
        assert final.content[1].text == TEXT
        assert await self.token_row() == USAGE_3_WORDS["modelaction"]

    async def test_openai_responses_reasoning_summary(self) -> None:
        await self.setup_channel()
        client = self.openai_client()
        reply = await self.in_thread(client.responses.create, model="claude-fake",
                                     input="hello there friend",
                                     reasoning={"effort": "low", "summary": "auto"})
        item = reply.output[0]
        assert item.type == "reasoning" and item.summary[0].text == THOUGHT_PART["text"]
        assert reply.output_text == TEXT
        assert self._sent_thinking() == {"thinkingBudget": 2048, "includeThoughts": True}
        assert reply.usage is not None
        assert reply.usage.output_tokens_details.reasoning_tokens == 2

        def stream() -> list[Any]:
            with client.responses.stream(model="claude-fake", input="hi",
                                         reasoning={"effort": "low", "summary": "auto"}) as s:
                return [*list(s), s.get_final_response()]

        *events, final = await self.in_thread(stream)
        deltas = [e.delta for e in events if e.type == "response.reasoning_summary_text.delta"]
        assert deltas == [THOUGHT_PART["text"]]
        assert final.output[0].type == "reasoning" and final.output_text == TEXT

    async def test_no_thoughts_unless_asked(self) -> None:
        await self.setup_channel()
        client = self.openai_client()
        reply = await self.in_thread(client.chat.completions.create, model="claude-fake",
                                     messages=PROMPT, reasoning_effort="low")
        assert self._sent_thinking() == {"thinkingBudget": 2048}
        assert reply.choices[0].message.content == TEXT
        assert getattr(reply.choices[0].message, "reasoning_content", None) is None
