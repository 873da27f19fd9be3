"""The §2.3 long-poll transport against a real HTTP peer: the fall-back when the WebSocket
endpoint answers 404, register/poll/result, results posted again until a 2xx, and a 401 that
stops the program."""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from connector.client import ConnectorClient
from connector.config import ConnectorConfig
from tests.connector.peers import PollPeer, listen, settle, wait_for
from tests.connector.runner_support import http_client, temp_dir


class LongPollTests(TestCase):
    def setUp(self) -> None:
        self.workspace = temp_dir(self, "lockgate-poll-")
        self.peer = PollPeer()
        self.port = listen(self.peer.site())
        self.clock = Clock()

    async def tearDown(self) -> None:
        self.client.stop()
        await settle(0.1)
        await self.port.stopListening()

    def start_client(self, token: str = "wpc_good", transport: str = "auto") -> ConnectorClient:
        config = ConnectorConfig(
            server_url=f"http://127.0.0.1:{self.port.getHost().port}", token=token,
            default_dir=self.workspace, transport=transport, poll_timeout=1.0,
        )
        self.client = ConnectorClient(
            reactor, config, clock=reactor, uniform=lambda low, high: 0.01,
            http=http_client(self),
        )
        self.client.start()
        return self.client

    async def test_falls_back_to_long_poll_when_the_websocket_endpoint_is_missing(self) -> None:
        self.peer.tasks = [{"id": "act-p1", "action": "run_command",
                            "workspace_path": self.workspace, "workspace_unrestricted": False,
                            "payload": {"command": "echo polled"}, "created_at": "x"}]
        client = self.start_client()
        await wait_for(lambda: self.peer.results.get("act-p1"))
        self.assertEqual(client.transport, "longpoll")
        self.assertEqual(client.last_outcome.kind, "unsupported")
        register = self.peer.of("register")[0]
        self.assertEqual((register["mode"], register["kind"]), ("platform", "cli"))
        self.assertEqual(
            self.peer.results["act-p1"],
            [{"success": True, "stdout": "polled\n", "exit_code": 0}],
        )
        await wait_for(lambda: not client.pending)
        await wait_for(lambda: len(self.peer.of("tasks/next")) >= 2)  # polling goes on

    async def test_results_are_posted_again_until_the_server_takes_them(self) -> None:
        self.peer.fail_results = 2
        self.peer.tasks = [{"id": "act-p2", "action": "list_files",
                            "workspace_path": self.workspace, "payload": {}}]
        client = self.start_client(transport="longpoll")
        await wait_for(lambda: self.peer.results.get("act-p2"), timeout=15)
        await wait_for(lambda: not client.pending)
        posts = [r for r in self.peer.requests if r[1] == "tasks/act-p2/result"]
        self.assertGreaterEqual(len(posts), 3)
        self.assertEqual(self.peer.results["act-p2"][0]["result"], ". is empty")

    async def test_401_stops_the_program(self) -> None:
        reason = await self.start_client(token="wpc_revoked", transport="longpoll").done
        self.assertEqual(reason.kind, "revoked")
        self.assertEqual([path for _m, path, _b in self.peer.requests], ["register"])

    async def test_websocket_only_mode_does_not_fall_back(self) -> None:
        client = self.start_client(transport="websocket")
        await wait_for(lambda: client.last_outcome is not None)
        self.assertEqual(client.last_outcome.kind, "unsupported")
        self.assertEqual(client.transport, "websocket")
        self.assertEqual({path for _m, path, _b in self.peer.requests}, {"ws"})
