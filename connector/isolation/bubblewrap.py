"""Sandbox commands under bubblewrap: the sandbox's own workspace read-write at ``/workspace``,
the system read-only, fresh pid/ipc/uts namespaces, no network unless the policy says
``bridge``, and CPU/memory/process/file-size limits set in the child.

bwrap runs as the daemon's user. A root daemon hands sandboxes to an unprivileged uid/gid
(``--sandbox-uid``): the kernel does not enforce ``RLIMIT_NPROC`` for root, and a command in
a sandbox has no business being root on the host anyway.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from connector.isolation.launch import LaunchSpec, ProcessLimits
from connector.isolation.policy import SandboxSpec

BWRAP = "/usr/bin/bwrap"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class BubblewrapRunner:
    """Builds the bwrap launch of one command for one sandbox."""

    executable: str = BWRAP
    uid: int | None = None
    gid: int | None = None

    def available(self) -> bool:
        return os.access(self.executable, os.X_OK)

    def command(
        self, command: str, workdir: str, spec: SandboxSpec, timeout_seconds: int
    ) -> LaunchSpec:
        argv = [self.executable, "--die-with-parent", "--new-session", "--unshare-user"]
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if spec.network == "none":
            argv.append("--unshare-net")
        argv += ["--hostname", "sandbox", "--clearenv"]
        argv += ["--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", "/workspace"]
        argv += ["--setenv", "LANG", "C.UTF-8", "--setenv", "TMPDIR", "/tmp"]  # noqa: S108 - the sandbox's tmpfs
        for directory in SYSTEM_DIRS:
            argv += _system_dir(directory)
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108 - private tmpfs
        argv += ["--bind", workdir, "/workspace", "--chdir", "/workspace"]
        argv += ["/bin/sh", "-c", command]
        limits = ProcessLimits(
            cpu_seconds=math.ceil(timeout_seconds * max(spec.cpu_cores, 0.01)) + 1,
            memory_bytes=spec.memory_mb * 1024 * 1024,
            processes=spec.pids_limit,
            file_bytes=spec.disk_gb * 1024 * 1024 * 1024,
        )
        return LaunchSpec(
            argv=argv, cwd=workdir, env={}, limits=limits, uid=self.uid, gid=self.gid
        )


def _system_dir(directory: str) -> list[str]:
    if os.path.islink(directory):
        return ["--symlink", os.readlink(directory), directory]
    if os.path.isdir(directory):
        return ["--ro-bind", directory, directory]
    return []
