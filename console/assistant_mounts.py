"""The assistant's console route groups and their mount points (agents contract §1.7-§1.13).

Kept beside ``console.app.MOUNTS`` rather than in it because these groups are also given the
run service (built by ``tap`` after the gateway), not only the console context.
"""

from __future__ import annotations

from console.routes.assistant_completions import CompletionRoutes
from console.routes.assistant_connector_tasks import ConnectorTaskRoutes
from console.routes.assistant_runs import RunRoutes

#: (mount path, route group class taking (ConsoleContext, RunService))
ASSISTANT_MOUNTS: list[tuple[str, type[CompletionRoutes | RunRoutes | ConnectorTaskRoutes]]] = [
    ("api/user/advanced-chat/completions", CompletionRoutes),
    ("api/user/advanced-chat/runs", RunRoutes),
    ("api/user/advanced-chat/connector-tasks", ConnectorTaskRoutes),
]
