"""The console scripts as real subprocesses against a real WebSocket peer: exit statuses,
the sandbox host's hello (capacity, capabilities) and a bubblewrap task end to end, and the
origin's host command line (``-server … -token … -mode sandboxd -data-dir …``)."""

from __future__ import annotations

import os
import sys

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SkipTest, TestCase

from tests.connector.peers import LinkPeer, listen, settle, wait_for, websocket_site
from tests.connector.runner_support import temp_dir
from tests.support.bubblewrap import require_bubblewrap

BIN = os.path.dirname(sys.executable)


def program(name: str, args: list[str]) -> Deferred:
    env = {key: value for key, value in os.environ.items() if key != "LOCKGATE_CONNECTOR_TOKEN"}
    return getProcessOutputAndValue(os.path.join(BIN, name), args, env=env, reactor=reactor)


class ProgramTests(TestCase):
    def setUp(self) -> None:
        self.peer = LinkPeer()
        self.port = listen(websocket_site(self.peer))
        self.url = f"http://127.0.0.1:{self.port.getHost().port}"

    async def tearDown(self) -> None:
        await wait_for(lambda: not self.peer.connections)
        await settle()
        await self.port.stopListening()

    async def test_a_refused_token_exits_3(self) -> None:
        _out, err, code = await program("lockgate-connector", ["--server", self.url, "--token", "wpc_x"])
        self.assertEqual(code, 3, err)
        self.assertIn(b"the server refused the token (HTTP 401)", err)
        self.assertEqual(self.peer.frames, [])

    async def test_usage_errors_exit_2(self) -> None:
        _out, err, code = await program("lockgate-connector", ["--server", self.url])
        self.assertEqual(code, 2)
        self.assertIn(b"a token is required", err)
        _out, err, code = await program(
            "lockgate-connector", ["--server", "ftp://x", "--token", "t"]
        )
        self.assertEqual(code, 2)
        _out, err, code = await program(
            "lockgate-connector", ["--server", self.url, "--token", "t", "--max-parallel", "9"]
        )
        self.assertEqual(code, 2)
        self.assertIn(b"--max-parallel must be between 1 and 8", err)

    async def test_connector_runs_a_task_then_stops_on_4401(self) -> None:
        workspace = temp_dir(self, "lockgate-prog-")
        self.peer.tasks = [{"id": "act-x", "action": "write_file", "workspace_path": workspace,
                            "payload": {"path": "hello.txt", "content": "hi"}}]
        token_file = os.path.join(workspace, ".token")
        with open(token_file, "w") as handle:
            handle.write("wpc_good\n")

        def revoke_after_ack(connection, frame) -> None:
            LinkPeer.on_frame(self.peer, connection, frame)
            if frame.get("type") == "task_result":
                connection.sendClose(4401, "token revoked")

        self.peer.on_frame = revoke_after_ack
        _out, err, code = await program(
            "lockgate-connector", ["--server", self.url, "--token-file", token_file]
        )
        self.assertEqual(code, 3, err)
        self.assertEqual(self.peer.of_type("task_result")[0]["result"], "Wrote 2 bytes to hello.txt")
        with open(os.path.join(workspace, "hello.txt")) as handle:
            self.assertEqual(handle.read(), "hi")

    async def test_sandboxd_reports_capacity_and_runs_isolated(self) -> None:
        require_bubblewrap()
        data = temp_dir(self, "lockgate-host-")
        os.chmod(data, 0o755)
        listener = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        self.addCleanup(listener.stopListening)
        command = (
            "echo inside > proof.txt; /usr/bin/python3 -c 'import socket; "
            f"socket.create_connection((\"127.0.0.1\", {listener.getHost().port}), 3)'"
        )
        self.peer.tasks = [{"id": "act-sbx", "action": "run_command", "workspace_path": "",
                            "payload": {"command": command, "cloud_sandbox_id": "acs-p1",
                                        "cloud_sandbox_spec": {"image": "", "cpu_cores": "1",
                                                               "memory_mb": 512, "disk_gb": 1,
                                                               "security_policy": {}}}}]

        def revoke_after_result(connection, frame) -> None:
            LinkPeer.on_frame(self.peer, connection, frame)
            if frame.get("type") == "task_result":
                connection.sendClose(4409, "superseded")

        self.peer.on_frame = revoke_after_result
        _out, err, code = await program(
            "lockgate-sandboxd",
            ["-server", self.url, "-token", "wpc_good", "-mode", "sandboxd", "-data-dir", data,
             "--cpus", "3", "--memory-mb", "1000", "--disk-gb", "7"],
        )
        self.assertEqual(code, 4, err)
        hello = self.peer.frames[0]
        self.assertEqual(hello["mode"], "sandboxd")
        self.assertEqual(hello["capacity"], {"cpu_cores": 3, "memory_mb": 1000, "disk_gb": 7})
        self.assertIn("bubblewrap", hello["capabilities"])
        result = self.peer.of_type("task_result")[0]
        self.assertFalse(result["success"])
        self.assertRegex(result["stderr"], "ConnectionRefusedError|Network is unreachable")
        with open(os.path.join(data, "sandboxes", "acs-p1", "work", "proof.txt")) as handle:
            self.assertEqual(handle.read(), "inside\n")

    async def test_sandboxd_measures_the_machine_without_flags(self) -> None:
        data = temp_dir(self, "lockgate-host-")
        os.chmod(data, 0o755)
        self.peer.after_welcome = lambda connection: connection.sendClose(4401, "disabled")
        _out, err, code = await program(
            "lockgate-sandboxd", ["--server", self.url, "--token", "wpc_good", "--data-dir", data]
        )
        self.assertEqual(code, 3, err)
        capacity = self.peer.frames[0]["capacity"]
        self.assertEqual(capacity["cpu_cores"], os.cpu_count())
        self.assertGreater(capacity["memory_mb"], 0)
        self.assertGreaterEqual(capacity["disk_gb"], 0)

    async def test_sandboxd_refuses_a_data_dir_the_sandbox_user_cannot_reach(self) -> None:
        if os.geteuid() != 0:
            raise SkipTest("the sandbox user is only switched to as root")
        closed = temp_dir(self, "lockgate-closed-")  # mkdtemp: 0700
        _out, err, code = await program(
            "lockgate-sandboxd",
            ["--server", self.url, "--token", "wpc_good", "--data-dir", os.path.join(closed, "d")],
        )
        self.assertEqual(code, 2)
        self.assertIn(f"{closed} is not searchable by others".encode(), err)
        self.assertEqual(self.peer.frames, [])
