"""A real MCP server for the tests, built with the official ``mcp`` package (FastMCP,
Streamable HTTP at ``/mcp``), run as its own process on a free loopback port.

``McpServerProcess(json_response=...)`` starts ``python -m tests.support.mcp_server`` and
waits until the port answers; ``stop()`` (also at exit) ends it.  The server keeps sessions
(it hands out ``Mcp-Session-Id`` and refuses later messages without it) and answers either
with event streams (the default) or with plain JSON bodies.

Tools: ``add(a, b)``, ``echo(text)``, ``whoami()`` (the ``Authorization`` header it was
sent), ``fail(reason)`` (raises: ``isError``), ``big(kib)`` (``kib`` KiB of text) and
``structured(n)`` (structured content only).
"""

from __future__ import annotations

import argparse
import atexit
import os
import socket
import subprocess
import sys
import time

from mcp.server.fastmcp import Context, FastMCP

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class McpServerProcess:
    def __init__(self, *, json_response: bool = False) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        argv = [sys.executable, "-m", "tests.support.mcp_server", "--port", str(self.port)]
        if json_response:
            argv.append("--json")
        self.process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        atexit.register(self.stop)
        self._wait_ready()

    def _wait_ready(self, seconds: float = 20.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the MCP test server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the MCP test server did not start listening")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


_servers: dict[bool, McpServerProcess] = {}


def mcp_server(*, json_response: bool = False) -> McpServerProcess:
    """The shared server of this kind, started on first use."""
    server = _servers.get(json_response)
    if server is None or server.process.poll() is not None:
        server = _servers[json_response] = McpServerProcess(json_response=json_response)
    return server


def build(port: int, json_response: bool) -> FastMCP:
    server = FastMCP("lockgate-test", host="127.0.0.1", port=port,
                     json_response=json_response, log_level="WARNING")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Repeat the text.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="The Authorization header of this request.")
    def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        return str(headers.get("authorization", "(none)"))

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ValueError(reason)

    @server.tool(description="A long text.")
    def big(kib: int) -> str:
        return "x" * (kib * 1024)

    @server.tool(description="Structured content only.", structured_output=True)
    def structured(n: int) -> dict[str, int]:
        return {"n": n, "square": n * n}

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    server = build(args.port, args.json)
    server.run(transport="streamable-http")


if __name__ == "__main__":
    main()
