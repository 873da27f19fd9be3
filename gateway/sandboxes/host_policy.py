"""A sandbox host's security policy and the range of sandboxes it can take (contract §3.2, §3.3).

Pure (no I/O) so the user's sandbox creation and the admin's host routes compute one answer:
``max`` of each dimension is the smallest of the global bound, the admin's policy cap
(``max_cpu_cores`` / ``max_memory_mb`` / ``max_disk_gb``) and the capacity the host last
reported in ``hello.capacity`` ([P-24]); capacity already used by other sandboxes is not counted.
A cap or a report that is not a positive number is ignored rather than trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

#: what an empty or absent policy means (§3.2)
DEFAULT_POLICY: dict[str, Any] = {"runtime": "docker", "network": "none",
                                  "read_only_rootfs": False, "pids_limit": 256}
MAX_CPU_CORES = Decimal(64)
MIN_MEMORY_MB = 128
MAX_MEMORY_MB = 262144
MIN_DISK_GB = 1
MAX_DISK_GB = 4096


class PolicyError(ValueError):
    """An admin's ``security_policy`` is not a JSON object (or JSON text of one)."""


def policy_text(value: Any) -> str:
    """An admin's ``security_policy`` input as stored: JSON text of an object (an object or
    JSON text of one is accepted); empty or absent -> the default policy."""
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


def parse_policy(text: str | None) -> dict[str, Any]:
    """The stored policy text as an object; empty, absent or not an object -> the default."""
    if not text or not text.strip():
        return dict(DEFAULT_POLICY)
    try:
        policy = orjson.loads(text)
    except orjson.JSONDecodeError:
        return dict(DEFAULT_POLICY)
    return policy if isinstance(policy, dict) and policy else dict(DEFAULT_POLICY)


def allowed_images(policy: dict[str, Any]) -> list[str]:
    """``allowed_images`` of the policy (``[]`` = any image)."""
    images = policy.get("allowed_images")
    if not isinstance(images, list):
        return []
    return [image for image in images if isinstance(image, str) and image]


def image_allowed(policy: dict[str, Any], image: str) -> bool:
    images = allowed_images(policy)
    return not images or image in images


def _positive(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() and number > 0 else None


def _smallest(bound: Decimal, *limits: Any) -> Decimal:
    found = [limit for limit in (_positive(value) for value in limits) if limit is not None]
    return min([bound, *found])


@dataclass(frozen=True)
class AvailableRange:
    """What a new sandbox on a host may ask for: ``0 < cpu <= max_cpu``, memory and disk in
    ``[min, max]`` (whole numbers), and an image of ``images`` (``[]`` = any)."""

    max_cpu_cores: Decimal
    max_memory_mb: int
    max_disk_gb: int
    images: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "cpu_cores": {"min": 0, "min_exclusive": True, "max": _number(self.max_cpu_cores)},
            "memory_mb": {"min": MIN_MEMORY_MB, "max": self.max_memory_mb},
            "disk_gb": {"min": MIN_DISK_GB, "max": self.max_disk_gb},
            "images": list(self.images),
        }

    def cpu_error(self) -> str:
        return f"CPU cores must be between 0 and {_text(self.max_cpu_cores)}"

    def memory_error(self) -> str:
        return f"Memory must be between {MIN_MEMORY_MB} MB and {self.max_memory_mb} MB"

    def disk_error(self) -> str:
        return f"Disk must be between {MIN_DISK_GB} GB and {self.max_disk_gb} GB"


def available_range(policy: dict[str, Any],
                    reported_capacity: dict[str, Any] | None) -> AvailableRange:
    """The host's available range from its policy and last reported capacity ([P-24])."""
    capacity = reported_capacity if isinstance(reported_capacity, dict) else {}
    cpu = _smallest(MAX_CPU_CORES, policy.get("max_cpu_cores"), capacity.get("cpu_cores"))
    memory = _smallest(Decimal(MAX_MEMORY_MB), policy.get("max_memory_mb"),
                       capacity.get("memory_mb"))
    disk = _smallest(Decimal(MAX_DISK_GB), policy.get("max_disk_gb"), capacity.get("disk_gb"))
    return AvailableRange(max_cpu_cores=cpu, max_memory_mb=int(memory), max_disk_gb=int(disk),
                          images=allowed_images(policy))


def _text(number: Decimal) -> str:
    text = format(number.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _number(number: Decimal) -> int | float:
    # a JSON number as in the contract's example; cores are not money, so a float is fine here
    return int(number) if number == number.to_integral_value() else float(number)
