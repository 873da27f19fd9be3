"""Shared pieces of the browser tests: a real ``twistd -n lockgate``, a fake upstream process,
and headless Debian Chromium driven by Playwright (nothing downloaded).

A missing Chromium is a failure, not a skip (``.ci/run`` installs it).  Every page a test opens
records the host of every request it makes (route interception) and every console error, so
tests can assert that nothing left 127.0.0.1 and that no page logged an error.  Screenshots go
to ``$LOCKGATE_ARTIFACTS/web-screenshots`` (default: the system temp folder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tests.test_twistd_plugin as twistd_support

CHROMIUM = os.environ.get("LOCKGATE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(os.environ.get("LOCKGATE_ARTIFACTS", tempfile.gettempdir())) / \
    "web-screenshots"
ROOT = Path(__file__).resolve().parents[2]
ADMIN = {"username": "admin", "email": "admin@example.com", "password": "correct horse"}


def chromium_path() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        raise AssertionError(f"Chromium is required for the browser tests: {CHROMIUM} is "
                             "missing (apt-get install chromium)")
    return CHROMIUM


class Server:
    """``twistd -n lockgate`` on a free loopback port with a fresh SQLite file."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="lockgate-web-")
        self.process = twistd_support.TwistdProcess(self.directory, twistd_support.free_port())
        self.base = f"http://127.0.0.1:{self.process.port}"

    def start(self) -> Server:
        self.process.wait_until_healthy()
        return self

    def stop(self) -> None:
        try:
            self.process.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def call(self, method: str, path: str, body: Any = None,
             token: str | None = None) -> Any:
        status, data = self.process.request(method, path, body, token)
        assert 200 <= status < 300, (method, path, status, data)
        return data


class Upstream:
    """``FakeUpstream`` in its own process; ``base_url`` is its loopback address."""

    def __init__(self, api_key: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.web.upstream_main", api_key], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("http://127.0.0.1:"):
            self.process.kill()
            raise AssertionError(f"fake upstream did not start: {line}")
        self.base_url = line

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


class Watched:
    """One browser context whose requests and console errors are recorded."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        self.hosts: set[str] = set()
        self.errors: list[str] = []
        #: every answer >= 400, to explain a console error
        self.failed: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("response", self._response)
        self.page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))

    def _route(self, route: Any) -> None:
        url = route.request.url
        if not url.startswith("data:"):
            self.hosts.add(urlsplit(url).hostname or url)
        route.continue_()

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.status} {response.request.method} {response.url}")

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
