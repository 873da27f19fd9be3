"""System-prompt order and context compression of the assistant (agents contract §1.8)."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from gateway.assistant.prompt import (
    ASSISTANT_INSTRUCTIONS,
    COMPRESSED_HEADER,
    SkillPrompt,
    compress,
    conversation,
    system_prompt,
)
from gateway.assistant.tool_set import EMPTY_RESULT, TRUNCATED, clip


class SystemPromptTests(TestCase):
    def test_sections_in_contract_order(self) -> None:
        text = system_prompt(
            admin_prompt="ADMIN", agent_prompt="AGENT",
            skills=[SkillPrompt("1", "Poet", "poems", "Rhyme.", True),
                    SkillPrompt("2", "Plain", "", "", False)],
            assistant_mode=True, tool_names=["activate_skill"])
        sections = text.split("\n\n")
        assert sections[:4] == ["ADMIN", "AGENT", "[Skill: Poet]\nRhyme.",
                                "Skills you can load with activate_skill:\n1: Poet — poems"]
        assert sections[4] == ASSISTANT_INSTRUCTIONS

    def test_chat_mode_has_no_assistant_block(self) -> None:
        text = system_prompt(admin_prompt="", agent_prompt="A", skills=[],
                             assistant_mode=False, tool_names=[])
        assert text == "A"


class CompressionTests(TestCase):
    def test_long_history_keeps_the_last_twelve(self) -> None:
        messages = [{"role": "user" if i % 2 else "assistant",
                     "content": f"m{i}  " + "x" * 5000} for i in range(20)]
        out = compress(messages)
        assert len(out) == 13 and out[1:] == messages[-12:]
        lines = out[0]["content"].split("\n")
        assert out[0]["role"] == "assistant" and lines[0] == COMPRESSED_HEADER
        assert len(lines) == 9
        assert lines[1] == "assistant: m0 " + "x" * 237 + "..."

    def test_short_or_few_messages_are_kept(self) -> None:
        few = [{"role": "user", "content": "x" * 60000}] * 8
        assert compress(few) == few
        small = [{"role": "user", "content": "hi"}] * 30
        assert compress(small) == small

    def test_conversation_puts_presets_after_the_system_prompt(self) -> None:
        out = conversation("SYS", [{"role": "user", "content": "preset"},
                                   {"role": "assistant", "content": ""}],
                           [{"role": "user", "content": "now"}], auto_compress=True)
        assert out == [{"role": "system", "content": "SYS"},
                       {"role": "user", "content": "preset"},
                       {"role": "user", "content": "now"}]


class ClipTests(TestCase):
    def test_truncation_and_empty(self) -> None:
        assert clip("") == EMPTY_RESULT
        assert clip("a" * 20000) == "a" * 20000
        assert clip("a" * 20001) == "a" * 20000 + TRUNCATED
