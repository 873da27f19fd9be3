"""The fields a device reports in ``hello``, ``heartbeat`` and HTTP register/heartbeat
(agents contract §2.3, §2.4), validated into what the store may write.

Strings are trimmed and cut to their column sizes (the origin truncates); a field of the wrong
type is a protocol error naming the field.  ``mode`` is advisory ([P-20], applied by the store).
"""

from __future__ import annotations

from typing import Any

LIMITS = {"name": 120, "hostname": 120, "os": 40, "arch": 40, "version": 80,
          "desktop_instance_id": 120}
KINDS = frozenset({"cli", "desktop"})
MODES = frozenset({"platform", "web_server", "sandboxd"})
MAX_CAPABILITIES = 32
CAPACITY_FIELDS = ("cpu_cores", "memory_mb", "disk_gb")


class HelloError(ValueError):
    """A reported field of the wrong type or out of range."""


def parse_hello(body: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, limit in LIMITS.items():
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise HelloError(f"{name} must be a string")
        fields[name] = value.strip()[:limit]
    kind = body.get("kind")
    if kind is not None:
        if kind not in KINDS:
            raise HelloError("kind must be cli or desktop")
        fields["kind"] = kind
    mode = body.get("mode")
    if mode is not None:
        if mode not in MODES:
            raise HelloError("mode must be platform, web_server or sandboxd")
        fields["mode"] = mode
    port = body.get("listen_port")
    if port is not None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise HelloError("listen_port must be an integer between 0 and 65535")
        fields["listen_port"] = port
    capabilities = body.get("capabilities")
    if capabilities is not None:
        if (not isinstance(capabilities, list) or len(capabilities) > MAX_CAPABILITIES
                or not all(isinstance(item, str) and len(item) <= 40 for item in capabilities)):
            raise HelloError("capabilities must be a list of short strings")
        fields["capabilities"] = capabilities
    return fields


def parse_max_parallel(body: dict[str, Any]) -> int:
    value = body.get("max_parallel", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 8:
        raise HelloError("max_parallel must be an integer between 1 and 8")
    return value


def parse_capacity(body: dict[str, Any]) -> dict[str, Any] | None:
    """``hello.capacity`` of a sandbox host: ``{cpu_cores, memory_mb, disk_gb}`` numbers."""
    capacity = body.get("capacity")
    if capacity is None:
        return None
    if not isinstance(capacity, dict):
        raise HelloError("capacity must be an object")
    parsed: dict[str, Any] = {}
    for name in CAPACITY_FIELDS:
        value = capacity.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise HelloError(f"capacity.{name} must be a non-negative number")
        parsed[name] = value
    return parsed
