"""``run_command`` on a plain device: real ``sh -c`` processes, their output, exit status,
timeout, caps, and a cancel that kills the whole process group."""

from __future__ import annotations

import os
import time

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from connector.actions.command import command_timeout
from connector.actions.outcome import ActionError
from tests.connector.runner_support import device_runner, process_gone, temp_dir


def task(command: str, workspace: str = "", task_id: str = "act-1", **payload):
    return {
        "id": task_id,
        "action": "run_command",
        "workspace_path": workspace,
        "payload": {"command": command, **payload},
    }


def read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


class RunCommandTests(TestCase):
    def setUp(self) -> None:
        self.root = temp_dir(self, "lockgate-cmd-")
        self.runner = device_runner(self, default_dir="/")

    async def test_output_and_success(self) -> None:
        result = await self.runner.start(task("echo out; echo err >&2; pwd", self.root), None)
        self.assertTrue(result.success)
        self.assertEqual(result.stdout, f"out\n{os.path.realpath(self.root)}\n")
        self.assertEqual(result.stderr, "err\n")
        self.assertEqual(result.exit_code, 0)
        self.assertEqual(result.wire_fields()["exit_code"], 0)

    async def test_unrestricted_runs_in_the_default_directory(self) -> None:
        result = await self.runner.start(task("pwd"), None)
        self.assertEqual(result.stdout, "/\n")

    async def test_the_device_token_is_not_in_the_command_environment(self) -> None:
        os.environ["LOCKGATE_CONNECTOR_TOKEN"] = "wpc_secret"
        self.addCleanup(os.environ.pop, "LOCKGATE_CONNECTOR_TOKEN", None)
        os.environ["LOCKGATE_TEST_VISIBLE"] = "yes"
        self.addCleanup(os.environ.pop, "LOCKGATE_TEST_VISIBLE", None)
        result = await self.runner.start(
            task('echo "[$LOCKGATE_CONNECTOR_TOKEN] [$LOCKGATE_TEST_VISIBLE]"', self.root), None
        )
        self.assertEqual(result.stdout, "[] [yes]\n")

    async def test_failure_reports_the_exit_status(self) -> None:
        result = await self.runner.start(task("echo no >&2; exit 3", self.root), None)
        self.assertFalse(result.success)
        self.assertEqual(result.error, "command failed: exit status 3")
        self.assertEqual(result.exit_code, 3)
        self.assertEqual(result.stderr, "no\n")

    async def test_no_output_says_so(self) -> None:
        result = await self.runner.start(task("true", self.root), None)
        self.assertEqual(result.result, "Command completed with no output")

    async def test_timeout_kills_and_reports(self) -> None:
        started = time.monotonic()
        result = await self.runner.start(task("echo before; sleep 30", self.root, timeout_sec=1), None)
        self.assertLess(time.monotonic() - started, 10)
        self.assertFalse(result.success)
        self.assertEqual(result.error, "command timed out after 1 seconds")
        self.assertEqual(result.stdout, "before\n")

    async def test_output_is_capped(self) -> None:
        result = await self.runner.start(
            task("head -c 300000 /dev/zero | tr '\\0' a", self.root), None
        )
        self.assertTrue(result.stdout.startswith("a" * 200_000 + "\n...(output truncated)"))
        self.assertEqual(result.stdout, "a" * 200_000 + "\n...(output truncated)")

    async def test_live_output_is_streamed(self) -> None:
        chunks: list[tuple[str, str]] = []
        result = await self.runner.start(
            task("echo one; sleep 0.2; echo two >&2", self.root), lambda s, d: chunks.append((s, d))
        )
        self.assertTrue(result.success)
        self.assertEqual(chunks, [("stdout", "one\n"), ("stderr", "two\n")])

    async def test_cancel_kills_the_process_group(self) -> None:
        pids = os.path.join(self.root, "pids")
        command = f"sleep 60 & echo $! > {pids}; sh -c 'sleep 61' & echo $! >> {pids}; wait"
        done = self.runner.start(task(command, self.root, task_id="act-c"), None)
        for _ in range(100):
            if os.path.exists(pids) and len(read(pids).split()) == 2:
                break
            await deferLater(reactor, 0.05, lambda: None)
        children = [int(pid) for pid in read(pids).split()]
        self.assertFalse(any(process_gone(pid) for pid in children))
        self.assertTrue(self.runner.cancel("act-c", "cancelled: by user"))
        result = await done
        self.assertEqual(result.error, "cancelled: by user")
        for _ in range(100):
            if all(process_gone(pid) for pid in children):
                break
            await deferLater(reactor, 0.05, lambda: None)
        self.assertTrue(all(process_gone(pid) for pid in children), children)
        self.assertFalse(self.runner.cancel("act-c", "again"))

    async def test_background_processes_do_not_outlive_the_command(self) -> None:
        result = await self.runner.start(task("sleep 60 & echo $!", self.root), None)
        pid = int(result.stdout)
        for _ in range(100):
            if process_gone(pid):
                break
            await deferLater(reactor, 0.05, lambda: None)
        self.assertTrue(process_gone(pid))

    async def test_bad_input_is_a_failed_result(self) -> None:
        result = await self.runner.start(task("   ", self.root), None)
        self.assertEqual(result.error, "command is required")
        result = await self.runner.start({"id": "x", "action": "format_disk", "payload": {}}, None)
        self.assertEqual(result.error, 'unsupported action "format_disk"')
        result = await self.runner.start(task("true", "relative/ws"), None)
        self.assertEqual(result.error, "workspace path must be absolute")
        result = await self.runner.start(
            {"id": "x", "action": "read_file", "workspace_path": self.root, "payload": []}, None
        )
        self.assertEqual(result.error, "payload must be an object")

    def test_timeout_bounds(self) -> None:
        self.assertEqual(command_timeout({}), 30)
        self.assertEqual(command_timeout({"timeout_sec": 5}), 5)
        self.assertEqual(command_timeout({"timeout_sec": "7"}), 7)
        self.assertEqual(command_timeout({"timeout_sec": 999}), 120)
        self.assertEqual(command_timeout({"timeout_sec": 0}), 30)
        with self.assertRaises(ActionError):
            command_timeout({"timeout_sec": "soon"})
