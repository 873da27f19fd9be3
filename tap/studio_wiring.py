"""Wires the studio control loop (agents contract §4.8) as one of the app's ordered services.

Every node runs it; the loop's database lease lets one node schedule at a time.  Its work
starts go through the node's assistant run service, so they are ordinary billed runs.
"""

from __future__ import annotations

import os
from typing import Any

from gateway.assistant.run_service import RunService
from gateway.store.pool import DBRunner
from gateway.studio.control_loop import ControlLoop
from gateway.studio.work_start import AssistantInternalRuns


def open_studio_loop(reactor: Any, clock: Any, db: DBRunner, runs: RunService,
                     node_name: str) -> ControlLoop:
    loop = ControlLoop(reactor, clock, db, AssistantInternalRuns(runs),
                       node_name or f"pid{os.getpid()}")
    loop.setName("studio control loop")
    return loop
