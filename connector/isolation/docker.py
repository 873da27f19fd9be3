"""Sandbox commands as ``docker run`` (agents contract §3.2), when the policy says ``docker``.

Each command is a fresh ``docker run --rm --init`` of the sandbox's image with every capability
dropped, no new privileges, the sandbox's CPU/memory/pids limits, its workspace at
``/workspace``, and ``sh -lc``. The container is named after the task so a cancel or timeout
can ``docker kill`` it: killing the CLI alone leaves the container running.

Whether a daemon answers is probed (``docker version``); without one, a docker task fails with
a clear error rather than running somewhere else.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from twisted.internet.interfaces import IReactorProcess
from twisted.internet.utils import getProcessOutputAndValue

from connector.isolation.launch import LaunchSpec
from connector.isolation.policy import SandboxSpec

NO_DAEMON = "docker runtime requested by the host policy, but no Docker daemon is available"


@dataclass(frozen=True)
class DockerRunner:
    executable: str

    def command(self, command: str, workdir: str, spec: SandboxSpec, task_id: str) -> LaunchSpec:
        name = f"lockgate-{task_id}"
        argv = [self.executable, "run", "--rm", "--init", "--name", name]
        argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        argv += ["--cpus", f"{spec.cpu_cores:g}", "--memory", f"{spec.memory_mb}m"]
        argv += ["--pids-limit", str(spec.pids_limit), "--network", spec.network]
        if spec.read_only_rootfs:
            argv += ["--read-only", "--tmpfs", "/tmp:rw,size=64m"]  # noqa: S108 - inside the container
        argv += ["-v", f"{workdir}:/workspace", "-w", "/workspace"]
        argv += [spec.image, "sh", "-lc", command]
        return LaunchSpec(
            argv=argv, cwd=workdir, kill_argv=[self.executable, "kill", name]
        )


async def probe_docker(
    reactor: IReactorProcess, executable: str | None = None
) -> DockerRunner | None:
    """A runner when ``docker version`` reaches a daemon, else ``None``."""
    path = executable or shutil.which("docker")
    if path is None or not os.access(path, os.X_OK):
        return None
    try:
        _out, _err, code = await getProcessOutputAndValue(
            path, ["version", "--format", "{{.Server.Version}}"], reactor=reactor
        )
    except OSError:
        return None
    return DockerRunner(executable=path) if code == 0 else None
