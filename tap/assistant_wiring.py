"""Wires the assistant runs: the run service (started here) and its console route groups."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from console.context import ConsoleContext
from console.routes.assistant_completions import CompletionRoutes
from console.routes.assistant_connector_tasks import ConnectorTaskRoutes
from console.routes.assistant_runs import RunRoutes
from gateway.assistant.run_service import RunService
from gateway.context import GatewayContext


def open_assistant(ctx: ConsoleContext, gateway: GatewayContext
                   ) -> tuple[RunService, list[tuple[str, Callable[[ConsoleContext], Any]]]]:
    runs = RunService(gateway, node_name=ctx.node_name or f"pid{os.getpid()}")
    runs.start()
    mounts: list[tuple[str, Callable[[ConsoleContext], Any]]] = [
        ("api/user/advanced-chat/completions", lambda c: CompletionRoutes(c, runs)),
        ("api/user/advanced-chat/runs", lambda c: RunRoutes(c, runs)),
        ("api/user/advanced-chat/connector-tasks", lambda c: ConnectorTaskRoutes(c, runs)),
    ]
    return runs, mounts
