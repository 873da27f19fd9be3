"""How many project source files one streamed /v1 chat call crosses (issue 16's map count).

A reader follows a call through the files it runs; fewer files, each with one job, is what the
layout work aims at.  This runs the real service in this process (``LockgateService``: the site,
the /v1 resource, the call, the relay, settlement queueing) against ``bench/upstream.py`` on
loopback, provisions it through the console API, sends one warm-up streamed chat call and then
one measured call with ``sys.setprofile`` on the reactor thread, from the moment the client
starts sending until it has read the stream's end.  The client runs in another thread and is
not profiled; the database threads (the settler's group commit) are not profiled either.

    .venv/bin/python bench/call_files.py [--list]
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from provision import provision  # noqa: E402
from run import free_port, wait_http  # noqa: E402

#: the project's own packages (the twisted plugin file is the project's too)
PACKAGES = ("gateway", "console", "tap")
MODEL = "bench-stream"


class FileRecorder:
    """A ``sys.setprofile`` hook that keeps the source file of every Python function called."""

    def __init__(self) -> None:
        self.files: set[str] = set()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            self.files.add(frame.f_code.co_filename)

    def project_files(self) -> list[str]:
        found = []
        for name in self.files:
            path = Path(name)
            try:
                relative = path.resolve().relative_to(ROOT)
            except ValueError:
                continue
            if relative.parts and relative.parts[0] in PACKAGES:
                found.append(str(relative))
        return sorted(found)


def streamed_call(port: int, key: str) -> bytes:
    body = json.dumps({"model": MODEL, "stream": True,
                       "messages": [{"role": "user", "content": "count the files"}]})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions", body,
                     {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 200 or b"[DONE]" not in data:
            raise SystemExit(f"streamed call failed: {response.status} {data[:300]!r}")
        return data
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true", help="print the files, one a line")
    args = parser.parse_args()

    from twisted.internet.task import react
    from twisted.internet.threads import deferToThreadPool

    from tap.options import Options
    from tap.service import LockgateService

    tmp = Path(tempfile.mkdtemp(prefix="lockgate-files-"))
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen(  # noqa: S603
        [sys.executable, str(ROOT / "bench" / "upstream.py"), "--port", str(up_port),
         "--chunks", "5"], stdout=subprocess.DEVNULL)
    options = Options()
    options.parseOptions(["--listen", f"tcp:{gw_port}:interface=127.0.0.1",
                          "--database", f"sqlite:///{tmp / 'files.sqlite3'}",
                          "--secret-file", str(tmp / "secret"), "--access-log", "off"])
    recorder = FileRecorder()

    def drive(reactor: Any) -> None:
        """The client side, on a thread: only the reactor thread is profiled."""
        if not wait_http(up_port, "/v1/models", 15) or not wait_http(gw_port, "/healthz", 30):
            raise SystemExit("upstream or gateway did not start")
        key, _ = provision("127.0.0.1", gw_port, f"http://127.0.0.1:{up_port}", {MODEL: "bench"})
        streamed_call(gw_port, key)  # warm-up: lazy imports, first-use caches
        started = threading.Event()
        reactor.callFromThread(lambda: (sys.setprofile(recorder), started.set()))
        started.wait(10)
        streamed_call(gw_port, key)
        stopped = threading.Event()
        reactor.callFromThread(lambda: (sys.setprofile(None), stopped.set()))
        stopped.wait(10)

    async def measure(reactor: Any) -> None:
        service = LockgateService(dict(options), reactor)
        service.startService()
        try:
            await deferToThreadPool(reactor, reactor.getThreadPool(), drive, reactor)
        finally:
            await service.stopService()
            upstream.terminate()
            upstream.wait(10)
        files = recorder.project_files()
        if args.list:
            print("\n".join(files))
        print(f"{len(files)} project source files crossed by one streamed /v1 chat call")

    react(measure)


if __name__ == "__main__":
    main()
