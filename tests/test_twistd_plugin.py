"""The real ``twistd -n lockgate`` process: start, serve setup/login/me over HTTP, stop cleanly.

Nothing is faked: a subprocess runs the installed plugin against a fresh SQLite file; the test
talks to it with ``http.client`` and waits for readiness by polling ``/healthz`` with a bound.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from typing import Any

from twisted.trial.unittest import TestCase

TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")
READY_WITHIN = 60.0
POLL = 0.1
#: after a SIGTERM shutdown twistd re-raises the signal on itself (twisted.scripts.twistd), so
#: a clean stop ends "killed by SIGTERM" -- after "Server Shut Down." and with no traceback
CLEAN_EXIT = -signal.SIGTERM


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOCKGATE_")}


class TwistdProcess:
    def __init__(self, directory: str, port: int, *extra: str) -> None:
        self.port = port
        self.output_path = os.path.join(directory, "twistd.log")
        self._output = open(self.output_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [TWISTD, "--pidfile=", "-n", "lockgate",
             "--listen", f"tcp:{port}:interface=127.0.0.1",
             "--database", f"sqlite:///{directory}/db.sqlite3",
             "--secret-file", os.path.join(directory, "secret"), *extra],
            cwd=directory, stdout=self._output, stderr=subprocess.STDOUT,
            env=clean_environment(),
        )

    def output(self) -> str:
        with open(self.output_path, "rb") as handle:
            return handle.read().decode(errors="replace")

    def request(self, method: str, path: str, body: Any = None,
                token: str | None = None) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            headers = {"Content-Type": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            payload = json.dumps(body).encode() if body is not None else None
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, (json.loads(data) if data else None)
        finally:
            connection.close()

    def wait_until_healthy(self) -> None:
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"twistd exited early ({self.process.returncode}):\n"
                                     + self.output())
            try:
                status, body = self.request("GET", "/healthz")
            except OSError:
                time.sleep(POLL)
                continue
            if status == 200 and body == {"status": "ok"}:
                return
            time.sleep(POLL)
        raise AssertionError("twistd did not become healthy in time:\n" + self.output())

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("twistd ignored SIGTERM:\n" + self.output()) from None
        self._output.close()
        return self.process.returncode


class TwistdPluginTests(TestCase):
    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="lockgate-twistd-")
        self.addCleanup(shutil.rmtree, self.directory, True)

    def start(self, *extra: str) -> TwistdProcess:
        process = TwistdProcess(self.directory, free_port(), *extra)
        self.addCleanup(process.stop)
        return process

    def test_setup_login_me_then_clean_shutdown(self) -> None:
        server = self.start()
        server.wait_until_healthy()

        status, body = server.request("GET", "/readyz")
        assert (status, body) == (200, {"status": "ready"}), (status, body)
        assert server.request("GET", "/api/setup/status") == (200, {"required": True})
        status, body = server.request("POST", "/auth/password/login",
                                      {"identifier": "root", "password": "password123"})
        assert status == 409, (status, body)

        status, body = server.request("POST", "/api/setup", {
            "site_name": "Twistd Test", "username": "root", "email": "root@example.com",
            "password": "password123"})
        assert status == 200, (status, body)
        assert body["user"]["is_admin"] is True

        status, body = server.request("POST", "/auth/password/login",
                                      {"identifier": "root@example.com",
                                       "password": "password123"})
        assert status == 200, (status, body)
        token = body["token"]
        status, me = server.request("GET", "/api/user/me", token=token)
        assert status == 200, (status, me)
        assert me["username"] == "root" and me["is_admin"] is True
        status, public = server.request("GET", "/api/public/settings")
        assert status == 200 and public["site_name"] == "Twistd Test"
        assert server.request("GET", "/api/user/me")[0] == 401
        assert server.request("GET", "/api/nope") == (404, {"error": "Not found",
                                                            "type": "not_found"})

        secret = os.path.join(self.directory, "secret")
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        assert os.path.getsize(secret) >= 32

        assert server.stop() == CLEAN_EXIT, server.output()
        output = server.output()
        assert "Traceback" not in output, output
        assert "Lockgate listening on" in output, output
        assert output.rstrip().endswith("Server Shut Down."), output
        # the start-up log says where things are and what to do next, without factory noise
        assert f"database sqlite:///{self.directory}/db.sqlite3" in output, output
        assert f"secret file {secret} (created now" in output, output
        assert "First-run setup is pending: POST /api/setup" in output, output
        assert "Starting factory" not in output and "Stopping factory" not in output, output
        # the access log goes to standard output by default, in whole lines
        assert '"GET /api/user/me HTTP/1.1" 200' in output, output
        with self.assertRaises(OSError):
            server.request("GET", "/healthz")

    def test_restart_keeps_secret_and_sessions(self) -> None:
        access_log = os.path.join(self.directory, "access.log")
        first = self.start("--access-log", access_log)
        first.wait_until_healthy()
        status, body = first.request("POST", "/api/setup", {
            "username": "root", "email": "root@example.com", "password": "password123"})
        assert status == 200, (status, body)
        token = body["token"]
        secret = os.path.join(self.directory, "secret")
        with open(secret, "rb") as handle:
            before = handle.read()
        assert first.stop() == CLEAN_EXIT, first.output()
        with open(access_log, "rb") as handle:
            lines = handle.read().decode().splitlines()
        assert any('"POST /api/setup HTTP/1.1" 200' in line for line in lines), lines
        assert "/api/setup HTTP" not in first.output()

        second = self.start("--access-log", "off")
        second.wait_until_healthy()
        with open(secret, "rb") as handle:
            assert handle.read() == before
        status, me = second.request("GET", "/api/user/me", token=token)
        assert status == 200, (status, me, second.output())
        assert second.request("GET", "/api/setup/status") == (200, {"required": False})
        assert second.stop() == CLEAN_EXIT, second.output()
        assert "Traceback" not in second.output()
        assert f"secret file {secret} (existing)" in second.output()
        assert "First-run setup is pending" not in second.output()

    def test_json_log_format_writes_one_object_per_line(self) -> None:
        server = self.start("--log-format", "json", "--access-log", "off")
        server.wait_until_healthy()
        assert server.request("GET", "/api/setup/status") == (200, {"required": True})
        assert server.stop() == CLEAN_EXIT, server.output()
        events = [json.loads(line) for line in server.output().splitlines()]
        formats = [event.get("log_format", "") for event in events]
        assert any(f.startswith("First-run setup is pending") for f in formats), formats
        assert events[-1]["log_format"] == "Server Shut Down.", events[-1]

    def test_help_lists_the_options(self) -> None:
        result = subprocess.run([TWISTD, "lockgate", "--help"], capture_output=True,
                                cwd=self.directory, env=clean_environment(), timeout=60,
                                check=False)
        assert result.returncode == 0, result
        text = result.stdout.decode()
        for option in ("--listen", "--database", "--secret-file", "--redis", "--config",
                       "--shutdown-grace", "--trusted-proxies", "--db-threads",
                       "--no-migrate", "--access-log", "--node-name", "--version",
                       "--log-format",
                       "LOCKGATE_"):
            assert option in text, option
        version = subprocess.run([TWISTD, "lockgate", "--version"], capture_output=True,
                                 cwd=self.directory, env=clean_environment(), timeout=60,
                                 check=False)
        assert version.returncode == 0, version
        assert version.stdout.decode().startswith("Lockgate 0.1.0 (build "), version
        listing = subprocess.run([TWISTD, "--help"], capture_output=True, cwd=self.directory,
                                 env=clean_environment(), timeout=60, check=False)
        assert "lockgate" in listing.stdout.decode()

    def test_bad_option_exits_with_a_usage_error(self) -> None:
        result = subprocess.run(
            [TWISTD, "--pidfile=", "-n", "lockgate", "--db-threads", "0"],
            capture_output=True, cwd=self.directory, env=clean_environment(), timeout=60,
            check=False)
        assert result.returncode != 0
        assert "db-threads must be between 1 and 64" in (result.stdout + result.stderr).decode()
        assert not os.path.exists(os.path.join(self.directory, "lockgate.secret"))
