"""One stdio MCP server process: newline-delimited JSON-RPC 2.0 over its stdin/stdout.

Why its own ProcessProtocol: a ``connector``-type MCP server (agents contract §1.3) lives for
many tasks, so the device keeps the process and multiplexes requests by JSON-RPC id instead of
starting it per call.  Every request has a deadline, a reply line is capped in size, and a
process that dies fails whatever was waiting with its exit and the tail of its stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessExitedAlready
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

from connector.actions.outcome import ActionError

#: the MCP protocol revision the device speaks (the same as the server's HTTP client)
PROTOCOL_VERSION = "2025-06-18"
#: the largest JSON-RPC line a server may send (the HTTP client's 4 MiB cap)
MAX_LINE_BYTES = 4 * 1024 * 1024
#: how much stderr is kept to explain a crash
STDERR_TAIL = 2048


class StdioMcpProcess(ProcessProtocol):
    """A started server; ``request`` sends one call, ``notify`` one notification."""

    def __init__(self, reactor: Any, key: str, server: dict[str, Any], timeout: float) -> None:
        self._reactor = reactor
        self.key = key
        self.server = server
        self.timeout = timeout
        self.started_at = reactor.seconds()
        self.alive = False
        self.initialized = False
        self._next_id = 0
        self._pending: dict[int, Deferred[dict[str, Any]]] = {}
        self._buffer = b""
        self._stderr = b""
        self._exit_text = ""
        self.ended: Deferred[None] = Deferred()

    @property
    def pid(self) -> int | None:
        return getattr(self.transport, "pid", None) if self.alive else None

    def start(self) -> None:
        command = str(self.server.get("command") or "")
        if not command:
            raise ActionError("mcp server command is required")
        executable = shutil.which(command) or command
        args = [command, *[str(arg) for arg in self.server.get("args") or []]]
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in (self.server.get("env") or {}).items()})
        cwd = str(self.server.get("cwd") or "") or None
        if cwd is not None and not os.path.isdir(cwd):
            raise ActionError(f"mcp server cwd does not exist: {cwd}")
        try:
            self._reactor.spawnProcess(self, executable, args, env=env, path=cwd)
        except OSError as exc:
            raise ActionError(f"could not start mcp server {command}: {exc.strerror}") from None
        self.alive = True

    def request(self, method: str, params: dict[str, Any],
                on_id: Any = None) -> Deferred[dict[str, Any]]:
        """The ``result`` of the reply (``ActionError`` for a JSON-RPC error, a timeout or a
        dead process); ``on_id(request_id)`` learns the id (to cancel the request)."""
        if not self.alive:
            raise ActionError(self._death())
        self._next_id += 1
        request_id = self._next_id
        if on_id is not None:
            on_id(request_id)
        waiter: Deferred[dict[str, Any]] = Deferred()
        self._pending[request_id] = waiter
        timer = self._reactor.callLater(self.timeout, self._expire, request_id)

        def settle(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            return result

        waiter.addBoth(settle)
        self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return waiter

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def cancel(self, request_id: int, reason: str) -> bool:
        """Give up on a request: the server is told (``notifications/cancelled``) and the
        waiter fails with ``reason``; False when it already ended."""
        waiter = self._pending.pop(request_id, None)
        if waiter is None:
            return False
        if self.alive:
            self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})
        waiter.errback(ActionError(reason))
        return True

    def kill(self) -> None:
        if self.alive and self.transport is not None:
            with contextlib.suppress(ProcessExitedAlready):  # its end is being delivered
                self.transport.signalProcess("KILL")

    def _write(self, message: dict[str, Any]) -> None:
        assert self.transport is not None
        self.transport.write(json.dumps(message).encode() + b"\n")

    def _expire(self, request_id: int) -> None:
        waiter = self._pending.pop(request_id, None)
        if waiter is not None:
            waiter.errback(ActionError(f"mcp server timed out after {self.timeout:g}s"))

    def outReceived(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._line(line)
        if len(self._buffer) > MAX_LINE_BYTES:
            self._buffer = b""
            self._fail_all(ActionError("mcp server response exceeds 4 MiB"))
            self.kill()

    def errReceived(self, data: bytes) -> None:
        self._stderr = (self._stderr + data)[-STDERR_TAIL:]

    def _line(self, line: bytes) -> None:
        if len(line) > MAX_LINE_BYTES:
            self._fail_all(ActionError("mcp server response exceeds 4 MiB"))
            self.kill()
            return
        try:
            message = json.loads(line)
        except ValueError:
            return  # a server's stray log line on stdout
        if not isinstance(message, dict) or not isinstance(message.get("id"), int):
            return  # notifications and server-to-client requests are not answered
        waiter = self._pending.pop(message["id"], None)
        if waiter is None:
            return
        error = message.get("error")
        if isinstance(error, dict):
            waiter.errback(ActionError(
                f"mcp error {error.get('code')}: {error.get('message', '')}"))
            return
        result = message.get("result")
        waiter.callback(result if isinstance(result, dict) else {})

    def processEnded(self, reason: Failure) -> None:
        self.alive = False
        code = getattr(reason.value, "exitCode", None)
        signal = getattr(reason.value, "signal", None)
        self._exit_text = (f"exit code {code}" if code is not None
                           else f"signal {signal}" if signal is not None else "ended")
        self._fail_all(ActionError(self._death()))
        if not self.ended.called:
            self.ended.callback(None)

    def _death(self) -> str:
        tail = self._stderr.decode("utf-8", "replace").strip()
        text = f"mcp server process exited ({self._exit_text or 'not running'})"
        return f"{text}: {tail}" if tail else text

    def _fail_all(self, error: ActionError) -> None:
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.errback(error)
