"""A hand-written stdio MCP server for the edge cases FastMCP never produces:
``python tests/support/raw_stdio_mcp.py paged|huge``.

``paged``: ``tools/list`` answers in two pages (``nextCursor`` ``"page-2"``), after a log line
and a notification on stdout the client must skip.  ``huge``: any ``tools/list`` is answered
with one line over 4 MiB.
"""

from __future__ import annotations

import json
import sys


def reply(request_id: int, result: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main(mode: str) -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            reply(request_id, {"protocolVersion": "2025-06-18", "capabilities": {},
                               "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "tools/list" and mode == "huge":
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {
                "tools": [], "pad": "x" * (5 * 1024 * 1024)}}) + "\n")
            sys.stdout.flush()
        elif method == "tools/list":
            sys.stdout.write("starting up, not JSON\n")
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/x"}) + "\n")
            cursor = message.get("params", {}).get("cursor")
            if cursor == "page-2":
                reply(request_id, {"tools": [{"name": "second"}]})
            else:
                reply(request_id, {"tools": [{"name": "first"}], "nextCursor": "page-2"})
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32601, "message": f"no method {method}"}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
