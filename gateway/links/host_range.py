"""A sandbox host's security policy (agents contract §3.2) and its computed
``available_range`` ([P-24], §3.3).

Pure.  Each ``max`` is the smallest of the global bound, the policy cap (``max_cpu_cores`` /
``max_memory_mb`` / ``max_disk_gb``) if set, and the capacity the host last reported in
``hello.capacity``.  ``images`` is ``allowed_images`` (``[]`` = any).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

DEFAULT_POLICY: dict[str, Any] = {"runtime": "docker", "network": "none",
                                  "read_only_rootfs": False, "pids_limit": 256}
MAX_CPU_CORES = Decimal(64)
MAX_MEMORY_MB = 262144
MIN_MEMORY_MB = 128
MAX_DISK_GB = 4096
MIN_DISK_GB = 1


class PolicyError(ValueError):
    """``security_policy`` is not a JSON object (or JSON text of one)."""


def parse_policy(value: Any) -> str:
    """The policy as stored: JSON text of an object; empty/absent -> the default policy."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return orjson.dumps(DEFAULT_POLICY).decode()
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise PolicyError("security_policy must be a JSON object") from None
    if not isinstance(value, dict):
        raise PolicyError("security_policy must be a JSON object")
    return orjson.dumps(value).decode()


def policy_object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text) if text.strip() else DEFAULT_POLICY
    except orjson.JSONDecodeError:
        return dict(DEFAULT_POLICY)
    return value if isinstance(value, dict) else dict(DEFAULT_POLICY)


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() and number >= 0 else None


def _smallest(bound: Decimal, *caps: Any) -> Decimal:
    found = [bound] + [number for number in map(_number, caps) if number is not None]
    return min(found)


def _json_number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def available_range(policy_text: str, reported: dict[str, Any] | None) -> dict[str, Any]:
    policy = policy_object(policy_text)
    capacity = reported or {}
    cpu = _smallest(MAX_CPU_CORES, policy.get("max_cpu_cores"), capacity.get("cpu_cores"))
    memory = _smallest(Decimal(MAX_MEMORY_MB), policy.get("max_memory_mb"),
                       capacity.get("memory_mb"))
    disk = _smallest(Decimal(MAX_DISK_GB), policy.get("max_disk_gb"), capacity.get("disk_gb"))
    images = policy.get("allowed_images")
    return {
        "cpu_cores": {"min": 0, "min_exclusive": True, "max": _json_number(cpu)},
        "memory_mb": {"min": MIN_MEMORY_MB, "max": int(memory)},
        "disk_gb": {"min": MIN_DISK_GB, "max": int(disk)},
        "images": [image for image in images if isinstance(image, str)]
        if isinstance(images, list) else [],
    }
