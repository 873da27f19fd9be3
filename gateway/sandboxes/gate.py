"""The check before each sandbox task is created, and the task's server-owned keys (§3.5).

Why a function of its own: the assistant run loop, studio runtimes and anything else that
queues work in a sandbox must refuse the same way -- the sandbox must be the user's, ``ready``,
on an enabled host (``cloud sandbox is unavailable``), and the user must have spendable credit
(a positive wallet or a usable subscription quota; ``insufficient balance for cloud sandbox
usage``) unless the caller runs in single-user mode.  The binding it returns names the host
device the task goes to and the two payload keys the server owns (``cloud_sandbox_id``,
``cloud_sandbox_spec``), which a client or an adjusted approval input can never override.

Run it inside a transaction: ``await db.transaction(sandbox_gate, user_id, sandbox_id, now)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.billing.money import format_nanos
from gateway.sandboxes.host_policy import parse_policy
from gateway.store import cloud_sandboxes, sandbox_hosts
from gateway.store.cloud_sandboxes import has_spendable_credit
from gateway.store.connection import Connection

UNAVAILABLE = "cloud sandbox is unavailable"
INSUFFICIENT_BALANCE = "insufficient balance for cloud sandbox usage"
#: payload keys only the server writes (kept on approval with adjusted input, [P-15])
SERVER_OWNED_KEYS = ("cloud_sandbox_id", "cloud_sandbox_spec")


class SandboxRefused(Exception):
    """The tool call fails with ``message`` (the contract's text)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class SandboxBinding:
    """Where a sandbox task goes and what the server adds to its payload."""

    sandbox_id: str
    user_id: int
    host_id: str
    device_id: str
    spec: dict[str, Any]

    def server_keys(self) -> dict[str, Any]:
        return {"cloud_sandbox_id": self.sandbox_id, "cloud_sandbox_spec": dict(self.spec)}

    def payload(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The task payload: the tool's arguments with the server-owned keys on top."""
        return {**arguments, **self.server_keys()}


def sandbox_gate(conn: Connection, user_id: int, sandbox_id: str, now: datetime, *,
                 require_credit: bool = True) -> SandboxBinding:
    """The binding for a new task in the user's sandbox, or ``SandboxRefused``."""
    sandbox = cloud_sandboxes.get_ready_for_user(conn, user_id, sandbox_id)
    found = sandbox_hosts.get(conn, sandbox.host_id) if sandbox is not None else None
    if sandbox is None or sandbox.status != cloud_sandboxes.READY or found is None \
            or not found[0].enabled:
        raise SandboxRefused(UNAVAILABLE)
    if require_credit and not has_spendable_credit(conn, user_id, now):
        raise SandboxRefused(INSUFFICIENT_BALANCE)
    host = found[0]
    spec = {"image": sandbox.image, "cpu_cores": format_nanos(sandbox.cpu_cores_nanos),
            "memory_mb": sandbox.memory_mb, "disk_gb": sandbox.disk_gb,
            "security_policy": parse_policy(host.security_policy)}
    return SandboxBinding(sandbox_id=sandbox.id, user_id=user_id, host_id=host.id,
                          device_id=host.connector_device_id, spec=spec)
