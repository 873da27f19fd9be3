"""Builds a real ``TaskRunner`` for the connector tests (a plain device or a sandbox host) and
small process helpers; nothing here is faked."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.web.client import Agent, HTTPConnectionPool

from connector.capacity import Capacity
from connector.config import ConnectorConfig
from connector.tasks import TaskRunner

SANDBOX_UID = 61234  # a uid nothing else on the test machine uses, so RLIMIT_NPROC is ours


def temp_dir(case: Any, prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=prefix)
    case.addCleanup(shutil.rmtree, path, True)
    return path


def http_client(case: Any) -> HTTPClient:
    pool = HTTPConnectionPool(reactor, persistent=False)
    case.addCleanup(pool.closeCachedConnections)
    return HTTPClient(Agent(reactor, pool=pool))


def device_runner(case: Any, default_dir: str) -> TaskRunner:
    config = ConnectorConfig(server_url="http://127.0.0.1:1", token="t", default_dir=default_dir)
    return TaskRunner(reactor, config, http_client(case))


def sandbox_config(data_dir: str, **overrides: Any) -> ConnectorConfig:
    root = os.geteuid() == 0
    fields: dict[str, Any] = {
        "server_url": "http://127.0.0.1:1",
        "token": "t",
        "mode": "sandboxd",
        "data_dir": data_dir,
        "default_dir": data_dir,
        "capacity": Capacity(cpu_cores=2, memory_mb=2048, disk_gb=10),
        "sandbox_uid": SANDBOX_UID if root else None,
        "sandbox_gid": SANDBOX_UID if root else None,
    }
    fields.update(overrides)
    return ConnectorConfig(**fields)


def sandbox_runner(case: Any, data_dir: str, **overrides: Any) -> TaskRunner:
    return TaskRunner(reactor, sandbox_config(data_dir, **overrides), http_client(case))


def read_text(path: str) -> str:
    """The file's text, or "" while it does not exist yet."""
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def processes_of_uid(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                for line in handle:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and not process_gone(int(entry)):
                            found.append(int(entry))
                        break
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found
