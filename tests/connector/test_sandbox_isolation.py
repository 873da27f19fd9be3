"""A sandbox host's tasks (agents contract §3.5) under real bubblewrap: no network, its own
workspace, read-only system, resource limits in force, a cancel that leaves nothing running."""

from __future__ import annotations

import os
import re

from twisted.internet import reactor
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import SkipTest, TestCase

from connector.isolation.docker import NO_DAEMON, DockerRunner
from connector.isolation.policy import sandbox_spec
from tests.connector.runner_support import (
    SANDBOX_UID,
    device_runner,
    processes_of_uid,
    sandbox_runner,
    temp_dir,
)
from tests.support.bubblewrap import require_bubblewrap

PYTHON = "/usr/bin/python3"
CONNECT = PYTHON + " -c 'import socket,sys; socket.create_connection((\"127.0.0.1\", {port}), 3); print(\"connected\")'"


def sandbox_task(action: str, task_id: str = "act-s1", sandbox: str = "acs-box1", **payload):
    return {
        "id": task_id,
        "action": action,
        "workspace_path": "",
        "payload": {
            "cloud_sandbox_id": sandbox,
            "cloud_sandbox_spec": payload.pop(
                "spec",
                {"image": "python:3.12-slim", "cpu_cores": "1", "memory_mb": 512, "disk_gb": 1,
                 "security_policy": {}},
            ),
            **payload,
        },
    }


class BubblewrapTests(TestCase):
    def setUp(self) -> None:
        require_bubblewrap()
        self.data = temp_dir(self, "lockgate-sbx-")
        os.chmod(self.data, 0o755)
        self.runner = sandbox_runner(self, self.data)

    def workdir(self, sandbox: str = "acs-box1") -> str:
        return os.path.join(self.data, "sandboxes", sandbox, "work")

    async def test_loopback_connect_fails_inside_and_works_outside(self) -> None:
        listener = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        self.addCleanup(listener.stopListening)
        command = CONNECT.format(port=listener.getHost().port)
        outside = await device_runner(self, "/").start(
            {"id": "o", "action": "run_command", "payload": {"command": command}}, None
        )
        self.assertTrue(outside.success, outside)
        self.assertEqual(outside.stdout, "connected\n")
        inside = await self.runner.start(sandbox_task("run_command", command=command), None)
        self.assertFalse(inside.success)
        self.assertNotIn("connected", inside.stdout)
        self.assertRegex(inside.stderr, "ConnectionRefusedError|Network is unreachable|OSError")

    async def test_bridge_policy_keeps_the_network(self) -> None:
        listener = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        self.addCleanup(listener.stopListening)
        spec = {"image": "", "cpu_cores": "1", "memory_mb": 512, "disk_gb": 1,
                "security_policy": {"runtime": "bwrap", "network": "bridge"}}
        result = await self.runner.start(
            sandbox_task("run_command", spec=spec, command=CONNECT.format(port=listener.getHost().port)),
            None,
        )
        self.assertEqual(result.stdout, "connected\n", result)

    async def test_own_workspace_read_only_system(self) -> None:
        written = await self.runner.start(
            sandbox_task("write_file", path="notes/a.txt", content="from the api", create_dirs=True),
            None,
        )
        self.assertTrue(written.success, written)
        command = (
            "cat notes/a.txt; echo; pwd; echo more >> notes/a.txt && echo appended; "
            "touch /usr/evil 2>/dev/null || echo usr-read-only; "
            f"ls {self.data} >/dev/null 2>&1 || echo host-hidden; "
            "ls /work >/dev/null 2>&1 || echo work-hidden"
        )
        result = await self.runner.start(sandbox_task("run_command", command=command), None)
        self.assertEqual(
            result.stdout,
            "from the api\n/workspace\nappended\nusr-read-only\nhost-hidden\nwork-hidden\n",
            result,
        )
        with open(os.path.join(self.workdir(), "notes/a.txt")) as handle:
            self.assertEqual(handle.read(), "from the apimore\n")
        listed = await self.runner.start(sandbox_task("list_files", path="notes"), None)
        self.assertEqual(listed.result, "a.txt (17 bytes)")
        other = await self.runner.start(
            sandbox_task("run_command", sandbox="acs-box2", command="ls -A"), None
        )
        self.assertEqual(other.result, "Command completed with no output")

    async def test_commands_run_unprivileged_with_limits(self) -> None:
        if os.geteuid() != 0:
            raise SkipTest("the uid switch is tested as root")
        spec = {"image": "", "cpu_cores": "0.5", "memory_mb": 256, "disk_gb": 1,
                "security_policy": {"pids_limit": 16}}
        command = "id -u; grep -E 'Max (processes|address space|cpu time|file size)' /proc/self/limits"
        result = await self.runner.start(
            sandbox_task("run_command", spec=spec, command=command, timeout_sec=10), None
        )
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], str(SANDBOX_UID))
        limits = {
            re.split(r"\s{2,}", line)[0]: re.split(r"\s{2,}", line)[1] for line in lines[1:]
        }
        self.assertEqual(limits["Max cpu time"], "6")  # ceil(10 s * 0.5 cores) + 1
        self.assertEqual(limits["Max processes"], "16")
        self.assertEqual(limits["Max file size"], str(1024**3))
        self.assertEqual(limits["Max address space"], str(256 * 1024 * 1024))

    async def test_memory_and_process_limits_are_enforced(self) -> None:
        if os.geteuid() != 0:
            raise SkipTest("RLIMIT_NPROC needs the unprivileged sandbox uid")
        spec = {"image": "", "cpu_cores": "1", "memory_mb": 128, "disk_gb": 1,
                "security_policy": {"pids_limit": 8}}
        memory = await self.runner.start(
            sandbox_task("run_command", spec=spec, command=PYTHON + " -c 'x = bytearray(300 * 1024 * 1024)'"),
            None,
        )
        self.assertFalse(memory.success)
        self.assertIn("MemoryError", memory.stderr)
        forks = await self.runner.start(
            sandbox_task(
                "run_command",
                spec=spec,
                command="n=0; for i in $(seq 30); do sleep 5 & n=$((n+1)); done; echo $n",
            ),
            None,
        )
        self.assertIn("Cannot fork", forks.stderr + forks.stdout)

    async def test_cpu_time_limit_kills_a_spinning_command(self) -> None:
        # RLIMIT_CPU = ceil(30 s * 0.04 cores) + 1 = 3 s of CPU, well before the 30 s timeout
        # even on a loaded machine
        spec = {"image": "", "cpu_cores": "0.04", "memory_mb": 256, "disk_gb": 1,
                "security_policy": {}}
        result = await self.runner.start(
            sandbox_task("run_command", spec=spec, timeout_sec=30, command="while :; do :; done"),
            None,
        )
        self.assertFalse(result.success)
        self.assertNotEqual(result.error, "command timed out after 30 seconds")

    async def test_cancel_leaves_nothing_running(self) -> None:
        if os.geteuid() != 0:
            raise SkipTest("processes are found by the sandbox uid")
        done = self.runner.start(
            sandbox_task("run_command", task_id="act-long", command="sleep 60 & sleep 61"), None
        )
        for _ in range(100):
            if len(processes_of_uid(SANDBOX_UID)) >= 2:
                break
            await deferLater(reactor, 0.05, lambda: None)
        self.assertGreaterEqual(len(processes_of_uid(SANDBOX_UID)), 2)
        self.runner.cancel("act-long", "cancelled: user")
        result = await done
        self.assertEqual(result.error, "cancelled: user")
        for _ in range(100):
            if not processes_of_uid(SANDBOX_UID):
                break
            await deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(processes_of_uid(SANDBOX_UID), [])

    async def test_tasks_of_one_sandbox_run_one_at_a_time(self) -> None:
        first = self.runner.start(
            sandbox_task("run_command", task_id="a1", command="sleep 0.5; echo done > f.txt"), None
        )
        finished: list = []
        first.addCallback(lambda result: finished.append(result) or result)
        second = self.runner.start(sandbox_task("read_file", task_id="a2", path="f.txt"), None)
        queued = self.runner.start(
            sandbox_task("run_command", task_id="a3", command="echo ran > g.txt"), None
        )
        other = await self.runner.start(
            sandbox_task("list_files", task_id="b1", sandbox="acs-box2"), None
        )
        self.assertTrue(other.success)  # another sandbox is not held up
        self.assertEqual(finished, [])
        self.assertTrue(self.runner.cancel("a3", "cancelled: user"))
        self.assertEqual((await second).result, "done\n")  # ran after the command, not beside it
        self.assertEqual((await queued).error, "cancelled: user")
        self.assertFalse(os.path.exists(os.path.join(self.workdir(), "g.txt")))
        self.assertTrue((await first).success)

    async def test_sandboxd_refuses_other_actions_and_bad_ids(self) -> None:
        fetched = await self.runner.start(sandbox_task("web_fetch", url="http://x"), None)
        self.assertEqual(fetched.error, 'sandboxd does not allow action "web_fetch"')
        escaped = await self.runner.start(sandbox_task("list_files", sandbox="../etc"), None)
        self.assertEqual(escaped.error, "cloud_sandbox_id is not a valid sandbox id")
        missing = await self.runner.start(
            {"id": "x", "action": "list_files", "payload": {}}, None
        )
        self.assertEqual(missing.error, "cloud_sandbox_id is required")
        absolute = await self.runner.start(sandbox_task("read_file", path="/etc/passwd"), None)
        self.assertEqual(absolute.error, "path must be relative to the workspace")
        spec = {"image": "", "cpu_cores": "1", "memory_mb": 256, "disk_gb": 1,
                "security_policy": {"network": "host"}}
        network = await self.runner.start(sandbox_task("run_command", spec=spec, command="id"), None)
        self.assertEqual(network.error, "unsupported sandbox network policy")
        self.assertEqual(os.listdir(os.path.join(self.data, "sandboxes")), ["acs-box1"])

    async def test_cleanup_removes_the_sandbox_directory(self) -> None:
        await self.runner.start(sandbox_task("write_file", path="a.txt", content="x"), None)
        self.assertTrue(os.path.isdir(self.workdir()))
        result = await self.runner.start(sandbox_task("cleanup_cloud_sandbox"), None)
        self.assertEqual(result.result, "Removed sandbox acs-box1")
        self.assertFalse(os.path.exists(os.path.dirname(self.workdir())))
        again = await self.runner.start(sandbox_task("cleanup_cloud_sandbox"), None)
        self.assertTrue(again.success)

    async def test_docker_policy_without_a_daemon_falls_back_to_bubblewrap(self) -> None:
        """§3.2's empty policy means docker; a host with no Docker daemon isolates with
        bubblewrap instead -- still without network."""
        listener = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        self.addCleanup(listener.stopListening)
        command = "echo $HOME; " + CONNECT.format(port=listener.getHost().port)
        for policy in ({"runtime": "docker"}, {}):
            spec = {"image": "python:3.12-slim", "cpu_cores": "1", "memory_mb": 256,
                    "disk_gb": 1, "security_policy": policy}
            runner = sandbox_runner(self, self.data, default_runtime="docker")
            result = await runner.start(
                sandbox_task("run_command", spec=spec, command=command), None)
            self.assertFalse(result.success, result)
            self.assertEqual(result.stdout, "/workspace\n", result)
            self.assertRegex(result.stderr, "ConnectionRefusedError|Network is unreachable")
        self.assertNotIn("docker", self.runner.capabilities)
        self.assertIn("bubblewrap", self.runner.capabilities)

    async def test_docker_policy_without_daemon_or_bubblewrap_is_a_clear_error(self) -> None:
        spec = {"image": "python:3.12-slim", "cpu_cores": "1", "memory_mb": 256, "disk_gb": 1,
                "security_policy": {"runtime": "docker"}}
        runner = sandbox_runner(self, self.data, bwrap_path=os.path.join(self.data, "no-bwrap"))
        result = await runner.start(sandbox_task("run_command", spec=spec, command="id"), None)
        self.assertEqual(result.error, NO_DAEMON)


class DockerCommandTests(TestCase):
    def test_docker_run_follows_the_policy(self) -> None:
        spec = sandbox_spec(
            {"cloud_sandbox_spec": {
                "image": "node:22", "cpu_cores": "1.5", "memory_mb": 768, "disk_gb": 2,
                "security_policy": {"runtime": "docker", "read_only_rootfs": True,
                                    "pids_limit": 64, "allowed_images": ["node:22"]}}},
            "bwrap",
        )
        launch = DockerRunner("/usr/bin/docker").command("npm test", "/data/s/work", spec, "act-9")
        self.assertEqual(
            launch.argv,
            ["/usr/bin/docker", "run", "--rm", "--init", "--name", "lockgate-act-9",
             "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
             "--cpus", "1.5", "--memory", "768m", "--pids-limit", "64", "--network", "none",
             "--read-only", "--tmpfs", "/tmp:rw,size=64m",
             "-v", "/data/s/work:/workspace", "-w", "/workspace", "node:22", "sh", "-lc", "npm test"],
        )
        self.assertEqual(launch.kill_argv, ["/usr/bin/docker", "kill", "lockgate-act-9"])

    def test_images_outside_the_allow_list_are_refused_on_the_host(self) -> None:
        from connector.actions.outcome import ActionError

        with self.assertRaises(ActionError) as caught:
            sandbox_spec(
                {"cloud_sandbox_spec": {"image": "evil:1", "cpu_cores": "1", "memory_mb": 256,
                 "disk_gb": 1, "security_policy": {"allowed_images": ["node:22"]}}},
                "bwrap",
            )
        self.assertEqual(str(caught.exception), "Container image is not allowed by this host policy")
