"""Checking ``POST /cloud-sandboxes`` (agents contract §3.3, §3.4): every 400 text verbatim.

Order: the three required fields, then the host (missing, disabled or offline: ``Sandbox host
is unavailable``, [P-26]), then CPU, memory and disk against the host's available range (the
messages carry the effective maxima, [P-24]), then the image against ``allowed_images``.  A
value of the wrong type (text that is no number, a fraction of a megabyte, a boolean) fails
with its range message, as the origin's would: it is not a size the host can give.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from console.http import ApiError
from gateway.billing.money import AmountError, parse_decimal, to_nanos
from gateway.sandboxes.host_policy import AvailableRange, image_allowed

HOST_REQUIRED = "Sandbox host is required"
NAME_REQUIRED = "Sandbox name is required"
IMAGE_REQUIRED = "Container image is required"
HOST_UNAVAILABLE = "Sandbox host is unavailable"
IMAGE_NOT_ALLOWED = "Container image is not allowed by this host policy"
NAME_TOO_LONG = "Sandbox name must be at most 120 characters"
IMAGE_TOO_LONG = "Container image must be at most 255 characters"


@dataclass(frozen=True)
class Required:
    host_id: str
    name: str
    image: str


@dataclass(frozen=True)
class SandboxSize:
    cpu_cores_nanos: int
    memory_mb: int
    disk_gb: int


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    return value.strip() if isinstance(value, str) else ""


def required_fields(body: dict[str, Any]) -> Required:
    host_id, name, image = _text(body, "host_id"), _text(body, "name"), _text(body, "image")
    if not host_id:
        raise ApiError(400, HOST_REQUIRED, field="host_id")
    if not name:
        raise ApiError(400, NAME_REQUIRED, field="name")
    if not image:
        raise ApiError(400, IMAGE_REQUIRED, field="image")
    if len(name) > 120:
        raise ApiError(400, NAME_TOO_LONG, field="name")
    if len(image) > 255:
        raise ApiError(400, IMAGE_TOO_LONG, field="image")
    return Required(host_id=host_id, name=name, image=image)


def _decimal(value: Any) -> Decimal | None:
    try:
        return parse_decimal(value, allow_negative=True)
    except AmountError:
        return None


def _whole(value: Any) -> int | None:
    number = _decimal(value)
    if number is None or number != number.to_integral_value():
        return None
    return int(number)


def sandbox_size(body: dict[str, Any], limits: AvailableRange) -> SandboxSize:
    cpu = _decimal(body.get("cpu_cores"))
    if cpu is None or not 0 < cpu <= limits.max_cpu_cores:
        raise ApiError(400, limits.cpu_error(), field="cpu_cores")
    memory = _whole(body.get("memory_mb"))
    if memory is None or not 128 <= memory <= limits.max_memory_mb:
        raise ApiError(400, limits.memory_error(), field="memory_mb")
    disk = _whole(body.get("disk_gb"))
    if disk is None or not 1 <= disk <= limits.max_disk_gb:
        raise ApiError(400, limits.disk_error(), field="disk_gb")
    return SandboxSize(cpu_cores_nanos=to_nanos(cpu), memory_mb=memory, disk_gb=disk)


def check_image(policy: dict[str, Any], image: str) -> None:
    if not image_allowed(policy, image):
        raise ApiError(400, IMAGE_NOT_ALLOWED, field="image")
