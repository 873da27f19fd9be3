"""End to end: ``twistd -n lockgate --redis ...`` starts on a real Redis, serves, and stops.

A real process is started, so this test polls in real time (bounded) for the port to answer.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from twisted.trial.unittest import TestCase

from tests.support.redis_server import fresh_prefix, redis_server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TwistdWithRedisTests(TestCase):
    def test_starts_serves_and_stops(self) -> None:
        server = redis_server()
        prefix = fresh_prefix()
        directory = tempfile.mkdtemp(prefix="lockgate-twistd-")
        self.addCleanup(shutil.rmtree, directory, True)
        port = _free_port()
        twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
        log_path = os.path.join(directory, "twistd.log")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [twistd, "-n", "--pidfile=", "lockgate",
                 "--redis", server.url(prefix),
                 "--listen", f"tcp:{port}:interface=127.0.0.1",
                 "--database", f"sqlite:///{os.path.join(directory, 'db.sqlite3')}",
                 "--secret-file", os.path.join(directory, "secret")],
                cwd=directory, stdout=log, stderr=subprocess.STDOUT,
            )
        self.addCleanup(lambda: process.poll() is None and process.kill())

        def output() -> str:
            with open(log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()

        body = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                    body = r.read()
                    break
            except OSError:
                time.sleep(0.1)
        assert body is not None, f"twistd did not serve /healthz:\n{output()}"

        # the process is on the bus: it subscribed its invalidation channels under the prefix
        channels = server.command("PUBSUB", "CHANNELS", prefix + "*")
        assert channels, f"no channels under {prefix!r}:\n{output()}"

        process.send_signal(signal.SIGTERM)
        # twistd re-raises the signal once it has shut down cleanly
        assert process.wait(30) in (0, -signal.SIGTERM), output()
        assert "Server Shut Down" in output(), output()
        assert server.command("PUBSUB", "CHANNELS", prefix + "*") == []
        assert "Traceback" not in output(), output()
