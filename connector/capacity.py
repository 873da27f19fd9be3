"""What this machine can give sandboxes, for ``hello.capacity`` (agents contract §3.3, [P-24]):
its CPU count, its physical memory, and the free space where sandboxes are stored."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class Capacity:
    """What a sandbox host offers (hello ``capacity``)."""

    cpu_cores: int
    memory_mb: int
    disk_gb: int


def machine_capacity(data_dir: str) -> Capacity:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Capacity(
        cpu_cores=os.cpu_count() or 1,
        memory_mb=memory // MIB,
        disk_gb=shutil.disk_usage(data_dir).free // GIB,
    )
