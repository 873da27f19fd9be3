"""Cloud sandboxes as a run's execution target (agents contract §1.8 step 1, §3.5).

Why a module of its own: a run that selects ``cloud_sandbox_id`` gets the ordinary connector
tools, but bound differently -- to the sandbox host's device, with approval mode
``full_access``, no workspace path, tool descriptions saying paths are relative to the
sandbox workspace ([P-29]), and every task carrying the two server-owned payload keys that
``sandbox_gate`` computes.  The connector tools ask this module three questions (which device,
which payload, which descriptions) and stay the same for devices and sandboxes.

At preparation (an HTTP error): the sandbox must be the user's, ``ready``, on an enabled host
(400 ``Cloud sandbox is unavailable``) whose device is online (400 ``Cloud sandbox host is
offline``).  Before each task (a tool failure): ``sandbox_gate`` again, so a sandbox deleted
or a wallet emptied mid-run refuses the next task with the gate's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.sandboxes.gate import UNAVAILABLE as GATE_UNAVAILABLE
from gateway.sandboxes.gate import SandboxRefused, sandbox_gate
from gateway.sandboxes.host_state import host_online
from gateway.settings.store import Settings
from gateway.store import cloud_sandboxes, sandbox_hosts
from gateway.store.cloud_sandboxes import SandboxRow
from gateway.store.connection import Connection
from gateway.store.devices import DeviceRow

UNAVAILABLE = "Cloud sandbox is unavailable"
HOST_OFFLINE = "Cloud sandbox host is offline"
#: what a tool failure caused by the gate starts with (§1.8 step 8's prefixes)
REFUSED_PREFIX = "Connector task unavailable: "
FULL_ACCESS = "full_access"

SANDBOX_DESCRIPTIONS = {
    "list_files": "List a directory in the cloud sandbox (paths are relative to the sandbox "
                  "workspace).",
    "read_file": "Read a text file in the cloud sandbox (paths are relative to the sandbox "
                 "workspace).",
    "write_file": "Write a file in the cloud sandbox (paths are relative to the sandbox "
                  "workspace).",
    "replace_text": "Replace exact text in a file in the cloud sandbox (paths are relative to "
                    "the sandbox workspace).",
    "run_command": "Run a shell command in the cloud sandbox's container (the working "
                   "directory is the sandbox workspace).",
    "web_search": "Search the web from the cloud sandbox.",
    "web_fetch": "Fetch a web page's readable text from the cloud sandbox.",
}


class SandboxUnavailable(Exception):
    """Preparation refused the sandbox; ``str()`` is the contract's 400 message."""


@dataclass(frozen=True)
class SandboxTarget:
    """The sandbox a run works in and the host device its tasks go to."""

    sandbox_id: str
    name: str
    device: DeviceRow
    #: spendable credit is checked before each task (not in single-user mode)
    require_credit: bool = True

    def describe(self) -> str:
        return (f"Cloud sandbox: {self.name}. Paths are relative to the sandbox workspace; "
                "commands run in the sandbox's container. Tool calls run without approval.")


def requires_credit(settings: Settings) -> bool:
    """Outside single-user ("personal") mode sandbox tasks need spendable credit (§3.5)."""
    return settings.text("system_mode") != "personal"


def usable_sandbox(conn: Connection, user_id: int, sandbox_id: str
                   ) -> tuple[SandboxRow, DeviceRow]:
    """The user's ``ready`` sandbox on an enabled host, and the host's device; else
    ``SandboxUnavailable`` (what sessions, completions and runs may select, §1.6, §3.4)."""
    sandbox = cloud_sandboxes.get_ready_for_user(conn, user_id, sandbox_id)
    found = sandbox_hosts.get(conn, sandbox.host_id) if sandbox is not None else None
    if sandbox is None or sandbox.status != cloud_sandboxes.READY or found is None \
            or not found[0].enabled:
        raise SandboxUnavailable(UNAVAILABLE)
    return sandbox, found[1]


def select_sandbox(conn: Connection, user_id: int, sandbox_id: str, now: datetime, *,
                   require_credit: bool = True) -> SandboxTarget:
    """§1.8 step 1 for ``cloud_sandbox_id``; ``SandboxUnavailable`` with the 400 message."""
    sandbox, device = usable_sandbox(conn, user_id, sandbox_id)
    if not host_online(device, now):
        raise SandboxUnavailable(HOST_OFFLINE)
    return SandboxTarget(sandbox_id=sandbox.id, name=sandbox.name, device=device,
                         require_credit=require_credit)


def sandbox_payload(conn: Connection, user_id: int, target: SandboxTarget,
                    payload: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The task payload with the server-owned keys, checked by the gate in the transaction
    that creates the task; ``SandboxRefused`` (the gate's text) when it may not be created."""
    binding = sandbox_gate(conn, user_id, target.sandbox_id, now,
                           require_credit=target.require_credit)
    if binding.device_id != target.device.id:
        raise SandboxRefused(GATE_UNAVAILABLE)
    return binding.payload(payload)


def refused_text(refusal: SandboxRefused) -> str:
    return REFUSED_PREFIX + refusal.message
