"""A second ``twistd -n lockgate`` on a port already bound exits non-zero (issue 14 defect 6).

It used to log "Lockgate failed to start" and stay alive forever with no listener, because
``reactor.stop()`` was called before the reactor ran.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from twisted.trial.unittest import TestCase

from tests.support.lockgate_node import LockgateNode

EXITS_WITHIN = 10.0
STARTS_WITHIN = 60.0


class PortInUseTests(TestCase):
    def test_a_bound_port_makes_the_process_exit_non_zero(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-port-")
        self.addCleanup(shutil.rmtree, directory, True)
        holder = socket.socket()
        self.addCleanup(holder.close)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        node = LockgateNode(directory, f"sqlite:///{os.path.join(directory, 'db.sqlite3')}",
                            port=port)
        self.addCleanup(node.kill)
        # start-up (imports, migrations) takes seconds on a loaded machine: the clock that
        # matters starts when the process has found out it cannot listen
        deadline = time.monotonic() + STARTS_WITHIN
        while "Lockgate failed to start" not in node.output():
            assert node.process.poll() is None or "Lockgate failed to start" in node.output(), \
                node.output()
            assert time.monotonic() < deadline, node.output()
            time.sleep(0.05)
        failed_at = time.monotonic()
        try:
            status = node.wait(timeout=EXITS_WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError("twistd stayed alive on a port in use:\n"
                                 + node.output()) from None
        assert status != 0, node.output()
        assert time.monotonic() - failed_at < EXITS_WITHIN
        output = node.output()
        assert "Address already in use" in output, output
