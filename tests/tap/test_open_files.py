"""The open-file limit is raised at start when it is too low for the stream capacity.

Real limits, no fakes: the unit tests lower this test process's own soft ``RLIMIT_NOFILE``
(restored afterwards) and call the function; the last test starts a real ``twistd -n lockgate``
with a soft limit of 256 and reads the running process's limit from ``/proc`` (and its
listener's queue length, ``tap.listen_backlog``).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import time
from typing import Any

from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SkipTest, TestCase

from tap.listen_backlog import LISTEN_BACKLOG
from tap.open_files import STREAM_CAPACITY, needed_fds, raise_open_file_limit
from tests.tap.test_listen_backlog import listen_queue_of, somaxconn
from tests.test_twistd_plugin import TWISTD, clean_environment, free_port


def soft_limit_of(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as limits:
        for line in limits:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError("no open-files line in /proc/<pid>/limits")


class RaiseOpenFileLimitTests(TestCase):
    def setUp(self) -> None:
        self.original = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, self.original)
        self.lines: list[str] = []

        def observe(event: dict[str, Any]) -> None:
            self.lines.append(formatEvent(event))

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)

    def set_soft(self, soft: int) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, self.original[1]))

    def limit_lines(self) -> list[str]:
        return [line for line in self.lines if "open-file limit" in line.lower()]

    def test_a_low_soft_limit_is_raised_to_what_the_capacity_needs_with_one_line(self) -> None:
        hard = self.original[1]
        if hard != resource.RLIM_INFINITY and hard < needed_fds(100):
            raise SkipTest(f"hard limit {hard} below what 100 streams need")
        self.set_soft(512)
        change = raise_open_file_limit(100)
        assert change is not None and change.enough
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (needed_fds(100), hard)
        assert self.limit_lines() == [
            f"Raised the open-file limit from 512 to {needed_fds(100)} "
            "(room for 100 concurrent streams)"]

    def test_a_soft_limit_that_is_enough_is_left_alone_without_a_line(self) -> None:
        self.set_soft(needed_fds(10))
        assert raise_open_file_limit(10) is None
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == needed_fds(10)
        assert self.limit_lines() == []

    def test_a_hard_limit_below_the_capacity_caps_it_and_says_how_many_streams_fit(self) -> None:
        hard = self.original[1]
        if hard == resource.RLIM_INFINITY:
            raise SkipTest("no hard limit to hit")
        capacity = hard  # twice as many descriptors as the hard limit allows
        self.set_soft(min(512, hard))
        change = raise_open_file_limit(capacity)
        assert change is not None and not change.enough
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        [line] = self.limit_lines()
        assert f"set to {hard}, the hard limit" in line, line
        assert f"room for about {(hard - 1024) // 2} concurrent streams" in line, line


class TwistdStartUpTests(TestCase):
    def test_twistd_raises_a_soft_limit_of_256_and_listens_with_a_long_queue(self) -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        expected = needed_fds(STREAM_CAPACITY)
        if hard != resource.RLIM_INFINITY:
            expected = min(expected, hard)
        directory = tempfile.mkdtemp(prefix="lockgate-nofile-")
        self.addCleanup(shutil.rmtree, directory, True)
        log_path = os.path.join(directory, "twistd.log")
        port = free_port()
        with open(log_path, "wb") as output:
            process = subprocess.Popen(
                [TWISTD, "--pidfile=", "-n", "lockgate",
                 "--listen", f"tcp:{port}:interface=127.0.0.1",
                 "--database", f"sqlite:///{directory}/db.sqlite3",
                 "--secret-file", os.path.join(directory, "secret")],
                cwd=directory, stdout=output, stderr=subprocess.STDOUT,
                env=clean_environment(),
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
        self.addCleanup(process.wait, 30)
        self.addCleanup(process.terminate)

        def log_text() -> str:
            with open(log_path, "rb") as handle:
                return handle.read().decode(errors="replace")

        deadline = time.monotonic() + 60
        while "Lockgate listening on" not in log_text():
            assert process.poll() is None, log_text()
            assert time.monotonic() < deadline, log_text()
            time.sleep(0.1)
        assert soft_limit_of(process.pid) == expected
        lines = [line for line in log_text().splitlines() if "open-file limit" in line.lower()]
        assert len(lines) == 1, lines
        assert f"from 256 to {expected}" in lines[0] or f"set to {expected}" in lines[0], lines
        assert listen_queue_of(port) == min(LISTEN_BACKLOG, somaxconn())
