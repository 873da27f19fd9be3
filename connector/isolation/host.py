"""A plain device (``lockgate-connector``): commands run on the machine itself, ``sh -c`` in the
workspace, with the device's environment — the user chose to link this machine — minus the
device token, which a command has no business reading."""

from __future__ import annotations

import os

from connector.config import TOKEN_ENV
from connector.isolation.launch import LaunchSpec


def host_command(command: str, cwd: str) -> LaunchSpec:
    env = {name: value for name, value in os.environ.items() if name != TOKEN_ENV}
    return LaunchSpec(argv=["/bin/sh", "-c", command], cwd=cwd, env=env)
