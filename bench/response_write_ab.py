"""Response side A/B: a sized answer written through ``LockgateChannel`` as it is, against the
same channel writing the way twisted.web does (head by ``writeSequence``, body by ``write``,
both buffered until the reactor's next pass), in one server process, phases alternating.

Why a separate bench: the gateway's whole path costs ~0.8-1 ms per request and this VM's CPU
speed drifts by 10-20 % within a minute, so a cut of a few percent is below what
``code_ab.py`` resolves.  Here only the response side differs between the two ports of one
process (pinned to CPU 0), so drift hits both alike; ``wrk`` (CPU 1) drives c=32 phases
A B B A ... and the server's CPU per request is read from ``/proc`` around each phase.

    .venv/bin/python bench/response_write_ab.py [--phases 8] [--duration 3]

With ``--serve PORT_A PORT_B`` the script is the server itself (what the driver starts); run
alone, ``strace -c -f -p PID`` around a ``wrk`` phase on each port counts the syscalls per
request (twisted.web's writes: two ``epoll_ctl`` per answer; one send: none).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import react

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import wrk_driver  # noqa: E402
from run import cpu_seconds, free_port, wait_http  # noqa: E402

#: a chat completion's size, as the gateway's non-streamed answers are
BODY = (b'{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench",'
        b'"choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},'
        b'"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,'
        b'"total_tokens":11}}')


def serve(reactor: Any, port_a: int, port_b: int) -> Deferred[None]:
    """Both sites on ``reactor`` (given by ``react``), serving until the process is ended."""
    from twisted.web.http import HTTPChannel
    from twisted.web.resource import Resource
    from twisted.web.server import NOT_DONE_YET

    from tap.http_channel import LockgateChannel, LockgateSite

    class Answer(Resource):
        """What ``gateway.v1.request_io.write_json_bytes`` does for a sized answer."""

        isLeaf = True

        def render(self, request: Any) -> Any:
            request.setResponseCode(200)
            request.responseHeaders.setRawHeaders(b"x-request-id", [b"req-bench"])
            request.setHeader(b"content-type", b"application/json")
            request.setHeader(b"content-length", str(len(BODY)).encode())
            request.write(BODY)
            request.finish()
            return NOT_DONE_YET

    class TwistedWrites(LockgateChannel):
        """The channel as it was: twisted.web's own response writes."""

        __slots__ = ()
        writeHeaders = HTTPChannel.writeHeaders
        write = HTTPChannel.write
        writeSequence = HTTPChannel.writeSequence

    before = LockgateSite(Answer(), logPath=os.devnull)
    before.protocol = TwistedWrites
    after = LockgateSite(Answer(), logPath=os.devnull)
    reactor.listenTCP(port_a, before, interface="127.0.0.1", backlog=512)
    reactor.listenTCP(port_b, after, interface="127.0.0.1", backlog=512)
    return Deferred()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", type=int, default=8, help="phases per side")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--serve", nargs=2, type=int, metavar=("PORT_A", "PORT_B"))
    args = parser.parse_args()
    if args.serve:
        react(serve, args.serve)
        return
    ports = {"A twisted.web writes": free_port(), "B one send": free_port()}
    command = ["taskset", "-c", "0", sys.executable, __file__, "--serve",
               *map(str, ports.values())]
    server = subprocess.Popen(command, cwd=HERE.parent)  # noqa: S603
    try:
        for port in ports.values():
            if not wait_http(port, "/", 20):
                raise SystemExit("server did not start")
        order = []
        for index in range(args.phases):
            pair = list(ports)
            order += pair if index % 2 == 0 else pair[::-1]
        # warm both sides
        for port in ports.values():
            wrk_driver.closed_loop(f"http://127.0.0.1:{port}/", b"{}", "x", 32, 1)
        figures: dict[str, list[float]] = {name: [] for name in ports}
        for name in order:
            before = cpu_seconds(server.pid) or 0.0
            result = wrk_driver.closed_loop(f"http://127.0.0.1:{ports[name]}/", b"{}", "x",
                                            32, args.duration, threads=1)
            spent = (cpu_seconds(server.pid) or 0.0) - before
            each = spent / max(1, result.requests) * 1e6
            figures[name].append(each)
            print(f"{name}: {result.requests} requests, {result.errors} errors, "
                  f"{each:.1f} CPU us/req", flush=True)
            time.sleep(0.2)
        medians = {name: statistics.median(values) for name, values in figures.items()}
        for name, values in figures.items():
            print(f"{name}: median {medians[name]:.1f} (min-max {min(values):.1f}-"
                  f"{max(values):.1f}) CPU us/req")
        a, b = medians.values()
        pairs = [y / x for x, y in zip(*figures.values(), strict=True)]
        print(f"B vs A: {b - a:+.1f} us/req ({(b / a - 1) * 100:+.1f} %); per-pair B/A "
              f"median {statistics.median(pairs):.3f} (min-max {min(pairs):.3f}-"
              f"{max(pairs):.3f})")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
