"""A plain device (``lockgate-connector``): commands run on the machine itself, ``sh -c`` in the
workspace, with the device's environment — the user chose to link this machine."""

from __future__ import annotations

from connector.isolation.launch import LaunchSpec


def host_command(command: str, cwd: str) -> LaunchSpec:
    return LaunchSpec(argv=["/bin/sh", "-c", command], cwd=cwd)
