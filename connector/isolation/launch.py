"""How a command becomes a process: the argv, and the small exec shim every child goes through.

The shim is the child's first program (``python -c SHIM``): it starts a new session, so the
whole command is one process group that a cancel or timeout kills at once; applies resource
limits with ``setrlimit``; and, when asked, drops to an unprivileged uid/gid before it
``exec``s the real argv. Doing this in the child (not in the daemon) keeps the daemon's own
limits untouched, and works the same on Linux and macOS.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

SHIM_SOURCE = """
import json, os, resource, sys
spec = json.loads(sys.argv[1])
os.setsid()
for name, value in spec.get("limits", {}).items():
    resource.setrlimit(getattr(resource, name), (value, value))
if spec.get("gid") is not None:
    os.setgroups([])
    os.setgid(spec["gid"])
if spec.get("uid") is not None:
    os.setuid(spec["uid"])
os.execvp(sys.argv[2], sys.argv[2:])
"""


@dataclass(frozen=True)
class ProcessLimits:
    """Resource limits applied in the child (``None`` = inherit)."""

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    processes: int | None = None
    file_bytes: int | None = None

    def rlimits(self) -> dict[str, int]:
        pairs = {
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_AS": self.memory_bytes,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_FSIZE": self.file_bytes,
        }
        return {name: value for name, value in pairs.items() if value is not None}


@dataclass(frozen=True)
class LaunchSpec:
    """Everything ``spawnProcess`` needs, plus how to stop what the process may have started
    outside its process group (a container keeps running when the docker CLI is killed)."""

    argv: list[str]
    cwd: str
    env: dict[str, str] | None = None
    limits: ProcessLimits = field(default_factory=ProcessLimits)
    uid: int | None = None
    gid: int | None = None
    kill_argv: list[str] | None = None

    def spawn_args(self) -> tuple[str, list[str]]:
        """The executable and argv to spawn: the shim, which then execs ``self.argv``."""
        spec = {"limits": self.limits.rlimits(), "uid": self.uid, "gid": self.gid}
        return sys.executable, [
            sys.executable,
            "-I",  # isolated: no PYTHON* variables, no user site, no cwd on sys.path
            "-S",  # no site-packages: the shim needs the standard library only (and starts faster)
            "-c",
            SHIM_SOURCE,
            json.dumps(spec),
            *self.argv,
        ]
