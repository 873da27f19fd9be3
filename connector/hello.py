"""The ``hello`` frame (agents contract §2.4) and the register/heartbeat body (§2.3): who this
device is, what it can do, and — for a sandbox host — what it can offer."""

from __future__ import annotations

import platform
import socket
from dataclasses import asdict
from typing import Any

from connector.config import ConnectorConfig

PROTOCOL_VERSION = 1
VERSION = "0.1.0"
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def device_fields(config: ConnectorConfig, capabilities: list[str]) -> dict[str, Any]:
    """The hello fields shared by both transports."""
    machine = platform.machine().lower()
    fields: dict[str, Any] = {
        "hostname": socket.gethostname()[:120],
        "os": platform.system().lower()[:40],
        "arch": ARCHES.get(machine, machine)[:40],
        "version": f"lockgate-connector/{VERSION}",
        "kind": config.kind,
        "mode": config.mode,
        "max_parallel": config.max_parallel,
        "capabilities": capabilities,
    }
    if config.name:
        fields["name"] = config.name
    if config.listen_port:
        fields["listen_port"] = config.listen_port
    if config.sandboxd and config.capacity is not None:
        fields["capacity"] = asdict(config.capacity)
    return fields


def hello_frame(config: ConnectorConfig, capabilities: list[str]) -> dict[str, Any]:
    return {"type": "hello", "protocol": PROTOCOL_VERSION, **device_fields(config, capabilities)}
