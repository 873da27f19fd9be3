"""The device client against a real §2.4 WebSocket peer: hello/welcome, dispatch, streamed
output, results held until acknowledged and re-sent after a reconnect, back-off with jitter on
a Clock, heartbeats, cancel, and the close codes that stop it (4401, 4409) or do not (4400)."""

from __future__ import annotations

import os
import socket

from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from connector.client import ConnectorClient, StopReason
from connector.config import ConnectorConfig
from tests.connector.peers import LinkPeer, listen, settle, wait_for, websocket_site
from tests.connector.runner_support import http_client, process_gone, read_text, temp_dir


def command_task(task_id: str, command: str, workspace: str) -> dict:
    return {"id": task_id, "action": "run_command", "workspace_path": workspace,
            "workspace_unrestricted": False, "payload": {"command": command},
            "created_at": "2026-11-25T10:00:01.120Z"}


class LinkCase(TestCase):
    def setUp(self) -> None:
        self.workspace = temp_dir(self, "lockgate-link-")
        self.peer = LinkPeer()
        self.port = listen(websocket_site(self.peer))
        self.clock = Clock()
        self.factors: list[tuple[float, float]] = []

    async def tearDown(self) -> None:
        if hasattr(self, "client"):
            self.client.stop()
        await wait_for(lambda: not self.peer.connections)
        await settle()
        await self.port.stopListening()

    def uniform(self, low: float, high: float) -> float:
        self.factors.append((low, high))
        return high

    def start_client(self, token: str = "wpc_good", port: int | None = None, **overrides) -> ConnectorClient:
        config = ConnectorConfig(
            server_url=f"http://127.0.0.1:{port or self.port.getHost().port}",
            token=token, default_dir=self.workspace, transport="websocket", **overrides,
        )
        self.client = ConnectorClient(
            reactor, config, clock=self.clock, uniform=self.uniform, http=http_client(self)
        )
        self.client.start()
        return self.client

    def delays(self) -> list[float]:
        return [call.getTime() - self.clock.seconds() for call in self.clock.getDelayedCalls()
                if call.func == self.client._connect]


class ProtocolTests(LinkCase):
    async def test_task_round_trip(self) -> None:
        self.peer.tasks = [command_task("act-1", "echo hi; echo oops >&2", self.workspace)]
        self.start_client(name="Laptop", max_parallel=2)
        await wait_for(lambda: self.peer.of_type("task_result"))
        hello = self.peer.frames[0]
        self.assertEqual(hello["type"], "hello")
        self.assertEqual(hello["protocol"], 1)
        self.assertEqual(
            {key: hello[key] for key in ("name", "kind", "mode", "max_parallel", "capabilities")},
            {"name": "Laptop", "kind": "cli", "mode": "platform", "max_parallel": 2,
             "capabilities": ["web"]},
        )
        self.assertTrue(hello["hostname"] and hello["os"] and hello["arch"] and hello["version"])
        self.assertNotIn("capacity", hello)
        outputs = self.peer.of_type("task_output")
        self.assertEqual([frame["seq"] for frame in outputs], list(range(1, len(outputs) + 1)))
        self.assertEqual({frame["task_id"] for frame in outputs}, {"act-1"})
        self.assertEqual("".join(f["data"] for f in outputs if f["stream"] == "stdout"), "hi\n")
        self.assertEqual(
            self.peer.of_type("task_result"),
            [{"type": "task_result", "task_id": "act-1", "success": True, "stdout": "hi\n",
              "stderr": "oops\n", "exit_code": 0}],
        )
        await wait_for(lambda: not self.client.pending)

    async def test_failed_action_still_gets_exactly_one_result(self) -> None:
        self.peer.tasks = [{"id": "act-2", "action": "read_file", "workspace_path": self.workspace,
                            "payload": {"path": "../../etc/passwd"}}]
        self.start_client()
        await wait_for(lambda: self.peer.of_type("task_result"))
        await settle(0.1)
        self.assertEqual(
            self.peer.of_type("task_result"),
            [{"type": "task_result", "task_id": "act-2", "success": False,
              "error": "path escapes the workspace"}],
        )

    async def test_unacked_result_is_resent_after_reconnect_and_not_rerun(self) -> None:
        marker = os.path.join(self.workspace, "runs")
        self.peer.tasks = [command_task("act-3", f"echo run >> {marker}", self.workspace)]
        self.peer.ack_results = False
        self.start_client()
        await wait_for(lambda: self.peer.of_type("task_result"))
        self.assertIn("act-3", self.client.pending)
        self.peer.connections[0].sendClose(1000, "going away")
        await wait_for(lambda: self.delays())
        self.assertEqual(self.delays(), [1.0])
        self.peer.ack_results = True
        self.clock.advance(1.0)  # reconnect; the peer dispatches act-3 again
        await wait_for(lambda: len(self.peer.of_type("task_result")) >= 2)
        await wait_for(lambda: not self.client.pending)
        results = self.peer.of_type("task_result")
        self.assertEqual(results[0], results[1])
        with open(marker) as handle:
            self.assertEqual(handle.read(), "run\n")
        self.assertEqual(self.client.attempts, 2)

    async def test_heartbeats_follow_the_welcome_interval(self) -> None:
        self.peer.heartbeat_interval = 5
        self.start_client()
        await wait_for(lambda: self.client.link is not None)
        self.assertEqual(self.peer.of_type("heartbeat"), [])
        self.clock.advance(5)
        await wait_for(lambda: len(self.peer.of_type("heartbeat")) == 1)
        self.clock.advance(5)
        await wait_for(lambda: len(self.peer.of_type("heartbeat")) == 2)

    async def test_answered_heartbeats_keep_the_link_without_native_pings(self) -> None:
        self.peer.heartbeat_interval = 5
        self.start_client()
        await wait_for(lambda: self.client.link is not None)
        for beat in range(1, 7):
            self.clock.advance(5)
            await wait_for(lambda beat=beat: len(self.peer.of_type("heartbeat")) == beat)
        await settle(0.1)
        self.assertEqual((self.peer.closed, self.peer.pings, self.client.attempts), (0, 0, 1))
        # no ping timer of autobahn's on the device side either
        self.assertIsNone(self.peer.connections[0].autoPingPendingCall)
        link = self.client.link
        self.assertIsNone(getattr(link, "autoPingPendingCall", None))

    async def test_a_server_that_stops_answering_is_dropped_and_linked_again(self) -> None:
        self.peer.heartbeat_interval = 5
        self.start_client()
        await wait_for(lambda: self.client.link is not None)
        self.peer.answer_heartbeats = False  # the server hangs: nothing comes back any more
        self.clock.advance(5)
        await wait_for(lambda: len(self.peer.of_type("heartbeat")) == 1)
        await settle(0.1)
        self.assertEqual(self.peer.closed, 0)
        self.clock.advance(5)  # two intervals without a byte from the server
        await wait_for(lambda: self.peer.closed == 1)
        await wait_for(lambda: self.delays())
        self.peer.answer_heartbeats = True
        self.clock.advance(self.delays()[0])
        await wait_for(lambda: len(self.peer.of_type("hello")) == 2 and self.client.link)
        self.assertEqual(self.client.attempts, 2)

    async def test_task_cancel_kills_the_command_and_sends_no_result(self) -> None:
        pid_file = os.path.join(self.workspace, "pid")
        self.peer.tasks = [command_task("act-4", f"sleep 60 & echo $! > {pid_file}; wait",
                                        self.workspace)]
        self.start_client()
        await wait_for(lambda: read_text(pid_file).strip())
        with open(pid_file) as handle:
            pid = int(handle.read())
        self.peer.connections[0].send({"type": "task_cancel", "task_id": "act-4",
                                       "reason": "cancelled by user"})
        await wait_for(lambda: process_gone(pid))
        await wait_for(lambda: not self.client.active)
        await settle(0.2)
        self.assertEqual(self.peer.of_type("task_result"), [])
        self.assertEqual(self.client.pending, {})

    async def test_noise_from_the_server_does_not_break_the_link(self) -> None:
        def noise(connection) -> None:
            connection.send(b"{not json")
            connection.send(b"[1, 2]")
            connection.send({"type": "surprise"})
            connection.send({"type": "error", "error": "unknown frame type"})
            connection.send({"type": "task", "task": {"action": "read_file"}})

        self.peer.after_welcome = noise
        self.peer.tasks = [command_task("act-5", "echo fine", self.workspace)]
        self.start_client()
        await wait_for(lambda: self.peer.of_type("task_result"))
        self.assertEqual(self.peer.of_type("task_result")[0]["stdout"], "fine\n")
        self.assertEqual(self.client.attempts, 1)


class CloseCodeTests(LinkCase):
    async def test_4401_stops_for_good(self) -> None:
        self.peer.after_welcome = lambda connection: connection.sendClose(4401, "token revoked")
        client = self.start_client()
        reason = await client.done
        self.assertEqual(reason.kind, "revoked")
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(client.attempts, 1)

    async def test_bad_token_is_refused_before_the_upgrade_and_stops(self) -> None:
        client = self.start_client(token="wpc_bad")
        reason = await client.done
        self.assertEqual(reason, StopReason("revoked", "the server refused the token (HTTP 401)"))
        self.assertEqual(self.peer.frames, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    async def test_4409_superseded_stops(self) -> None:
        self.peer.after_welcome = lambda connection: connection.sendClose(4409, "superseded")
        reason = await self.start_client().done
        self.assertEqual(reason.kind, "superseded")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    async def test_4400_protocol_violation_reconnects(self) -> None:
        self.peer.after_welcome = lambda connection: connection.sendClose(4400, "hello required")
        self.start_client()
        await wait_for(lambda: self.delays())
        self.assertFalse(self.client.done.called)
        self.assertEqual(self.client.last_outcome.kind, "closed")


class BackoffTests(LinkCase):
    async def test_unreachable_server_backs_off_exponentially_with_jitter(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead_port = probe.getsockname()[1]
        self.start_client(port=dead_port, backoff_initial=1.0, backoff_max=8.0)
        seen = []
        for _ in range(6):
            await wait_for(lambda: self.delays())
            delay = self.delays()[0]
            seen.append(delay)
            self.clock.advance(delay)
        self.assertEqual(seen, [1.0, 2.0, 4.0, 8.0, 8.0, 8.0])
        self.assertTrue(all(bounds == (0.5, 1.0) for bounds in self.factors))
        self.assertEqual(self.client.last_outcome.kind, "unavailable")

    async def test_backoff_resets_once_linked(self) -> None:
        self.start_client()
        await wait_for(lambda: self.client.link is not None)
        self.client.backoff.failures = 3
        self.peer.connections[0].sendClose(1000)
        await wait_for(lambda: self.delays())
        self.assertEqual(self.delays(), [8.0])  # three failures before the link came up
        self.clock.advance(8.0)
        await wait_for(lambda: self.client.link is not None)
        self.assertEqual(self.client.backoff.failures, 0)
        self.peer.connections[0].sendClose(1000)
        await wait_for(lambda: self.delays())
        self.assertEqual(self.delays(), [1.0])
