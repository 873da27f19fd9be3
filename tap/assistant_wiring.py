"""Wires the assistant runs: the run service (started and stopped by ``tap.app`` as one of
its ordered pieces) and its console route groups."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from console.assistant_mounts import ASSISTANT_MOUNTS
from console.context import ConsoleContext
from gateway.assistant.run_service import RunService
from gateway.context import GatewayContext


def open_assistant(ctx: ConsoleContext, gateway: GatewayContext
                   ) -> tuple[RunService, list[tuple[str, Callable[[ConsoleContext], Any]]]]:
    runs = RunService(gateway, node_name=ctx.node_name or f"pid{os.getpid()}")

    def factory(group: Any) -> Callable[[ConsoleContext], Any]:
        return lambda console: group(console, runs)

    return runs, [(path, factory(group)) for path, group in ASSISTANT_MOUNTS]
