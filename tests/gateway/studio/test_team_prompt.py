"""The chief's prompt sections in an ``agent_group`` run (agents contract §1.8 step 5, §4.16):
pure functions of the studio team, placed after the assistant block and before the device."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from gateway.assistant.prompt import ASSISTANT_INSTRUCTIONS, system_prompt
from gateway.assistant.studio_team import Member, StudioTeam


def member(member_id: str, kind: str) -> Member:
    return Member(id=member_id, name=member_id.title(), type=kind, chat_agent_id="1",
                  prompt="", model="m")


class TeamPromptTests(TestCase):
    def team(self, *, intake: bool = False) -> StudioTeam:
        members = [member("boss", "chief"), member("ann", "worker"), member("cri", "critic"),
                   member("rev", "reviewer"), member("chk", "checker")]
        return StudioTeam(studio_id="ops", studio_name="Ops", chief=members[0],
                          members=members, intake=intake)

    def test_the_roster_lists_who_can_be_delegated_to(self) -> None:
        assert self.team().roster() == (
            "Studio Ops (ops). Members you can delegate to with agent_delegate:\n"
            "- ann: Ann (worker)\n- cri: Cri (critic)\n- rev: Rev (reviewer)")

    def test_the_intake_desk_and_the_lead_are_told_different_jobs(self) -> None:
        assert "intake desk" in self.team(intake=True).identity()
        assert "studio_create_work" in self.team(intake=True).identity()
        lead = self.team().identity()
        assert "agent_delegate" in lead and "intake" not in lead

    def test_studio_sections_follow_the_assistant_block_and_precede_the_device(self) -> None:
        team = self.team()
        prompt = system_prompt(admin_prompt="", agent_prompt="Agent.", skills=[],
                               assistant_mode=True, tool_names=[],
                               connector_description="Device: laptop",
                               studio_sections=(team.identity(), team.roster()))
        assert prompt.split("\n\n") == ["Agent.", ASSISTANT_INSTRUCTIONS, team.identity(),
                                        team.roster(), "Device: laptop"]
