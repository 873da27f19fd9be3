"""Which studio tools an ``agent_group`` run's chief gets (agents contract §1.8 step 4, §4.8,
§4.16), plugged into the assistant's run service as a tool hook.

- the owner's chat while operations are ``operating``: the intake desk's two tools only;
- any other studio chat and every internal work run: ``agent_delegate``;
- internal work runs also get the intake names as tool errors (no work spawns work);
- review runs also get ``studio_review_work``.
"""

from __future__ import annotations

from gateway.assistant.run_service import RunTools
from gateway.assistant.tool_set import Tool
from gateway.studio.delegation import Delegation
from gateway.studio.intake_tools import intake_tools, refused_intake_tools
from gateway.studio.review_tool import review_tool


def studio_tools(hooked: RunTools, *, review: bool) -> list[Tool]:
    team = hooked.prepared.team
    if team is None:
        return []
    db, now = hooked.db, hooked.now
    if team.intake and team.company_id is not None:
        return intake_tools(db, now, hooked.run.user_id, team.company_id)
    tools = [Delegation(hooked, team).tool()]
    if team.internal:
        tools += refused_intake_tools()
    if review:
        tools.append(review_tool(db, now, hooked.run.id, hooked.events_written))
    return tools
