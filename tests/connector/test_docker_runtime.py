"""The docker side of a sandbox host without pretending to have Docker: the daemon probe
against the real ``docker`` CLI (and a stand-in CLI for the "daemon answers" case), and the
kill command a cancel runs so a container does not outlive its task."""

from __future__ import annotations

import os
import shutil
import stat

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import SkipTest, TestCase

from connector.actions.command import RunningCommand
from connector.isolation.docker import DockerRunner, probe_docker
from connector.isolation.launch import LaunchSpec
from tests.connector.runner_support import read_text, temp_dir


class DockerProbeTests(TestCase):
    async def test_no_daemon_means_no_runner(self) -> None:
        docker = shutil.which("docker")
        if docker is None:
            self.assertIsNone(await probe_docker(reactor))
            return
        if os.path.exists("/var/run/docker.sock"):
            raise SkipTest("a Docker daemon may be running here")
        self.assertIsNone(await probe_docker(reactor, docker))

    async def test_a_cli_that_reaches_a_daemon_gives_a_runner(self) -> None:
        directory = temp_dir(self, "lockgate-docker-")
        cli = os.path.join(directory, "docker")
        with open(cli, "w") as handle:
            handle.write('#!/bin/sh\n[ "$1" = version ] && echo 27.0.0 && exit 0\nexit 1\n')
        os.chmod(cli, stat.S_IRWXU)
        self.assertEqual(await probe_docker(reactor, cli), DockerRunner(executable=cli))

    async def test_missing_cli_means_no_runner(self) -> None:
        self.assertIsNone(await probe_docker(reactor, "/nonexistent/docker"))


class KillCommandTests(TestCase):
    async def test_cancel_runs_the_kill_command(self) -> None:
        directory = temp_dir(self, "lockgate-kill-")
        marker = os.path.join(directory, "killed")
        launch = LaunchSpec(
            argv=["/bin/sh", "-c", "sleep 30"],
            cwd=directory,
            kill_argv=["/bin/sh", "-c", f"echo lockgate-act-1 > {marker}"],
        )
        running = RunningCommand(reactor, reactor, launch, 60, None).start()
        await deferLater(reactor, 0.2, lambda: None)
        running.cancel("cancelled: user")
        result = await running.done
        self.assertEqual(result.error, "cancelled: user")
        for _ in range(200):
            if read_text(marker):
                break
            await deferLater(reactor, 0.02, lambda: None)
        self.assertEqual(read_text(marker), "lockgate-act-1\n")
