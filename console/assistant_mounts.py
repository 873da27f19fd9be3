"""The assistant's console route groups and their mount points (agents contract §1.7-§1.13).

Kept beside ``console.app.MOUNTS`` rather than in it because these groups are also given the
run service (built by ``tap`` after the gateway), not only the console context.  Connector
tasks and their decisions are ``console.routes.connector_tasks`` (in ``console.app.MOUNTS``).
"""

from __future__ import annotations

from console.routes.assistant_completions import CompletionRoutes
from console.routes.assistant_runs import RunRoutes
from console.routes.personal_company import PersonalCompanyRoutes
from console.routes.studios import StudioRoutes

#: (mount path, route group class taking (ConsoleContext, RunService))
ASSISTANT_MOUNTS: list[tuple[str, type[
        CompletionRoutes | RunRoutes | PersonalCompanyRoutes | StudioRoutes]]] = [
    ("api/user/advanced-chat/completions", CompletionRoutes),
    ("api/user/advanced-chat/runs", RunRoutes),
    # studio operations (agents contract §4.18): pause and cancel stop runs
    ("api/user/personal-company", PersonalCompanyRoutes),
    # studios (agents contract §4.1): deleting one stops its operations' runs
    ("api/user/advanced-chat/agent-groups", StudioRoutes),
]
