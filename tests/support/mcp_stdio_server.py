"""A real stdio MCP server for the connector tests, built with the official ``mcp`` package
(FastMCP, stdio transport): ``python tests/support/mcp_stdio_server.py``.

Tools: ``add(a, b)``, ``secret(name)`` (an environment variable it was started with),
``pid()`` (its process id: shows a restart), ``crash()`` (the process exits at once),
``sleep(seconds)``, ``fail(reason)`` (raises: ``isError``).
"""

from __future__ import annotations

import os
import time

from mcp.server.fastmcp import FastMCP

server = FastMCP("lockgate-stdio-test")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="An environment variable of the server process.")
def secret(name: str) -> str:
    return os.environ.get(name, "(unset)")


@server.tool(description="The server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Exit the process at once.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Sleep, then answer.")
def sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


@server.tool(description="Always fails.")
def fail(reason: str) -> str:
    raise ValueError(reason)


if __name__ == "__main__":
    server.run("stdio")
