"""A sandbox task's ``cloud_sandbox_spec`` (agents contract §3.5) read into one typed value.

The server puts the sandbox's size and the host's ``security_policy`` (§3.2) in every sandbox
task; the host trusts neither blindly: unknown network values and images outside
``allowed_images`` are refused here, again, as §3.2 says.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from connector.actions.outcome import ActionError

DEFAULT_PIDS_LIMIT = 256
NETWORKS = ("none", "bridge")


@dataclass(frozen=True)
class SandboxSpec:
    image: str
    cpu_cores: float
    memory_mb: int
    disk_gb: int
    runtime: str
    network: str
    read_only_rootfs: bool
    pids_limit: int


def sandbox_spec(payload: dict[str, Any], default_runtime: str) -> SandboxSpec:
    """Read and check ``payload["cloud_sandbox_spec"]``; ``runtime`` absent = the host default."""
    raw = payload.get("cloud_sandbox_spec") or {}
    if not isinstance(raw, dict):
        raise ActionError("cloud_sandbox_spec must be an object")
    policy = raw.get("security_policy") or {}
    if not isinstance(policy, dict):
        raise ActionError("security_policy must be an object")
    network = str(policy.get("network") or "none")
    if network not in NETWORKS:
        raise ActionError("unsupported sandbox network policy")
    image = str(raw.get("image") or "")
    allowed = policy.get("allowed_images") or []
    if isinstance(allowed, list) and allowed and image not in allowed:
        raise ActionError("Container image is not allowed by this host policy")
    return SandboxSpec(
        image=image,
        cpu_cores=float(_decimal(raw.get("cpu_cores", "1"), "cpu_cores")),
        memory_mb=int(_decimal(raw.get("memory_mb", 512), "memory_mb")),
        disk_gb=int(_decimal(raw.get("disk_gb", 1), "disk_gb")),
        runtime=str(policy.get("runtime") or default_runtime),
        network=network,
        read_only_rootfs=bool(policy.get("read_only_rootfs", False)),
        pids_limit=int(_decimal(policy.get("pids_limit") or DEFAULT_PIDS_LIMIT, "pids_limit")),
    )


def _decimal(value: Any, name: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except InvalidOperation as exc:
        raise ActionError(f"cloud_sandbox_spec.{name} must be a number") from exc
    if not number.is_finite() or number <= 0:
        raise ActionError(f"cloud_sandbox_spec.{name} must be positive")
    return number
