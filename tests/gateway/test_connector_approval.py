"""The approval rule of connector tasks (agents contract §1.13, [P-14])."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from gateway.assistant.connector_approval import auto_approved, needs_approval


class AutoApprovalTests(TestCase):
    def test_prefix_must_end_at_a_token_boundary(self) -> None:
        assert auto_approved("git status", ["git status"])
        assert auto_approved("  git status --short ", ["git status"])
        assert auto_approved("ls", ["ls"])
        assert not auto_approved("lsblk", ["ls"])
        assert not auto_approved("git statusx", ["git status"])

    def test_shell_metacharacters_always_need_approval(self) -> None:
        for command in ["ls; rm -rf /", "ls && rm x", "ls | sh", "ls `rm x`", "ls $(rm x)",
                        "ls > f", "ls < f", "ls\nrm x", "ls & rm x"]:
            assert not auto_approved(command, ["ls"]), command

    def test_rule_per_mode_and_action(self) -> None:
        assert not needs_approval("write_file", "full_access", [])
        assert not needs_approval("read_file", "manual", [])
        assert not needs_approval("web_fetch", "assistant", [])
        assert needs_approval("write_file", "manual", [])
        assert needs_approval("replace_text", "manual", ["replace"])
        assert not needs_approval("run_command", "manual", ["ls"], "ls -la")
        assert needs_approval("run_command", "manual", ["ls"], "rm -rf x")
        assert needs_approval("run_command", "assistant", ["ls"], "ls -la")
        assert needs_approval("something_else", "manual", [])
