"""How fast the device program answers: task round trips through a real WebSocket link, and
what starting a command costs on a plain device and in a bubblewrap sandbox.

A §2.4 peer (autobahn) and ``ConnectorClient`` run in this one process on loopback; the peer
sends one task at a time and times task → task_result. Commands are timed through
``TaskRunner`` directly (spawn, the exec shim, ``sh -c true``, exit).

    .venv/bin/python bench/connector_bench.py [--tasks 500] [--commands 50]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autobahn.twisted.resource import WebSocketResource
from autobahn.twisted.websocket import (
    WebSocketServerFactory,
    WebSocketServerProtocol,
)
from treq.client import HTTPClient
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import react
from twisted.web.client import Agent, HTTPConnectionPool
from twisted.web.resource import Resource
from twisted.web.server import Site

from connector.capacity import Capacity
from connector.client import ConnectorClient
from connector.config import ConnectorConfig
from connector.tasks import TaskRunner


class TimingPeer(WebSocketServerProtocol):
    factory: TimingFactory

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        frame = json.loads(payload)
        if frame["type"] == "hello":
            self.sendMessage(json.dumps({"type": "welcome", "device": {}, "heartbeat_interval": 20,
                                         "server_time": ""}).encode())
            self.factory.linked.callback(self)
        elif frame["type"] == "task_result":
            self.sendMessage(json.dumps({"type": "task_result_ack", "task_id": frame["task_id"],
                                         "ok": True}).encode())
            self.factory.waiting.callback(frame)


class TimingFactory(WebSocketServerFactory):
    protocol = TimingPeer

    def __init__(self) -> None:
        super().__init__()
        self.linked: Deferred[TimingPeer] = Deferred()
        self.waiting: Deferred[dict[str, Any]] = Deferred()


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms (n={len(ordered)})"


async def round_trips(reactor: Any, workspace: str, count: int) -> list[float]:
    factory = TimingFactory()
    root = Resource()
    node = root
    for segment in (b"api", b"advanced-chat", b"connectors"):
        child = Resource()
        node.putChild(segment, child)
        node = child
    node.putChild(b"ws", WebSocketResource(factory))
    port = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
    config = ConnectorConfig(server_url=f"http://127.0.0.1:{port.getHost().port}", token="t",
                             default_dir=workspace, transport="websocket")
    client = ConnectorClient(reactor, config)
    client.start()
    peer = await factory.linked
    with open(os.path.join(workspace, "a.txt"), "w") as handle:
        handle.write("x" * 1000)
    samples = []
    for index in range(count):
        factory.waiting = Deferred()
        task = {"id": f"act-{index}", "action": "file_sha256", "workspace_path": workspace,
                "payload": {"path": "a.txt"}}
        started = time.perf_counter()
        peer.sendMessage(json.dumps({"type": "task", "task": task}).encode())
        result = await factory.waiting
        samples.append(time.perf_counter() - started)
        assert result["success"], result
    client.stop()
    await port.stopListening()
    return samples


async def command_starts(runner: TaskRunner, task: dict[str, Any], count: int) -> list[float]:
    samples = []
    for index in range(count):
        started = time.perf_counter()
        result = await runner.start({**task, "id": f"act-c{index}"}, None)
        samples.append(time.perf_counter() - started)
        assert result.success, result
    return samples


async def main(reactor: Any, options: argparse.Namespace) -> None:
    workspace = tempfile.mkdtemp(prefix="lockgate-bench-")
    os.chmod(workspace, 0o755)  # noqa: S103 - the sandbox uid must reach its directory
    try:
        http = HTTPClient(Agent(reactor, pool=HTTPConnectionPool(reactor, persistent=False)))
        trips = await round_trips(reactor, workspace, options.tasks)
        print(f"task round trip over WebSocket (file_sha256, 1 KB): {percentiles(trips)}")
        device = TaskRunner(reactor, ConnectorConfig(server_url="http://x", token="t",
                                                     default_dir=workspace), http)
        plain = await command_starts(device, {"action": "run_command", "workspace_path": workspace,
                                              "payload": {"command": "true"}}, options.commands)
        print(f"run_command 'true' on the device:            {percentiles(plain)}")
        if os.access("/usr/bin/bwrap", os.X_OK):
            root = os.geteuid() == 0
            host = TaskRunner(reactor, ConnectorConfig(
                server_url="http://x", token="t", mode="sandboxd", data_dir=workspace,
                capacity=Capacity(1, 1024, 1), sandbox_uid=65534 if root else None,
                sandbox_gid=65534 if root else None), http)
            spec = {"image": "", "cpu_cores": "1", "memory_mb": 512, "disk_gb": 1,
                    "security_policy": {}}
            boxed = await command_starts(host, {"action": "run_command", "payload": {
                "command": "true", "cloud_sandbox_id": "acs-bench", "cloud_sandbox_spec": spec}},
                options.commands)
            print(f"run_command 'true' in bubblewrap:            {percentiles(boxed)}")
    finally:
        shutil.rmtree(workspace, True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--commands", type=int, default=50)
    options = parser.parse_args()
    react(lambda r: ensureDeferred(main(r, options)))
