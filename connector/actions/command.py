"""``run_command`` (agents contract §2.7): one process group per command, output streamed and
capped, a timeout, and a cancel that kills the whole group.

The command starts through the exec shim (``isolation.launch``), which makes it a session
leader, so ``killpg`` reaches everything it started. When the shell exits, whatever it left in
its group is killed too: a task's processes never outlive the task, and the pipes close so the
result is not held up by a stray background child.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.interfaces import IDelayedCall, IReactorProcess, IReactorTime
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

from connector.actions.outcome import ActionError, ActionResult
from connector.isolation.launch import LaunchSpec

DEFAULT_TIMEOUT = 30
MAX_TIMEOUT = 120
OUTPUT_CAP_BYTES = 200_000
STREAM_CAP_BYTES = 256 * 1024
NO_OUTPUT = "Command completed with no output"
TRUNCATED = "\n...(output truncated)"

# (stream, text) for every chunk of live output: "stdout", "stderr" or "log".
OutputSink = Callable[[str, str], None]


def command_timeout(payload: dict[str, Any]) -> int:
    """``timeout_sec``: default 30, at most 120; anything not positive means the default."""
    value = payload.get("timeout_sec")
    if value is None or value == "":
        return DEFAULT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ActionError("timeout_sec must be a number")
    try:
        seconds = int(float(value))
    except ValueError as exc:
        raise ActionError("timeout_sec must be a number") from exc
    return DEFAULT_TIMEOUT if seconds <= 0 else min(seconds, MAX_TIMEOUT)


def command_text(payload: dict[str, Any]) -> str:
    command = payload.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ActionError("command is required")
    return command


class _Capture:
    """One stream's bytes up to the cap, plus its incremental decoder for live output."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.truncated = False
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def keep(self, chunk: bytes) -> None:
        room = OUTPUT_CAP_BYTES - len(self.data)
        if len(chunk) > room:
            self.truncated = True
        self.data += chunk[: max(room, 0)]

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        return text + TRUNCATED if self.truncated else text


class RunningCommand(ProcessProtocol):
    """A started command; ``done`` fires with its ``ActionResult`` (never errbacks)."""

    def __init__(
        self,
        clock: IReactorTime,
        spawner: IReactorProcess,
        launch: LaunchSpec,
        timeout: int,
        on_output: OutputSink | None,
    ) -> None:
        self.done: Deferred[ActionResult] = Deferred()
        self._clock = clock
        self._spawner = spawner
        self._launch = launch
        self._timeout = timeout
        self._on_output = on_output
        self._captures = {1: _Capture(), 2: _Capture()}
        self._streamed = 0
        self._pid: int | None = None
        self._timer: IDelayedCall | None = None
        self._finished = False

    def start(self) -> RunningCommand:
        executable, argv = self._launch.spawn_args()
        env = self._launch.env if self._launch.env is not None else dict(os.environ)
        try:
            self._spawner.spawnProcess(
                self, executable, argv, env=env, path=self._launch.cwd
            )
        except OSError as exc:
            self._finish(ActionResult.failed(f"command could not start: {exc}"))
            return self
        self._timer = self._clock.callLater(self._timeout, self._timed_out)
        return self

    # ProcessProtocol

    def connectionMade(self) -> None:
        assert self.transport is not None
        self._pid = self.transport.pid
        self.transport.closeStdin()

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        capture = self._captures.get(childFD)
        if capture is None:
            return
        capture.keep(data)
        if self._on_output is None or self._finished:
            return
        if self._streamed >= STREAM_CAP_BYTES:
            return
        self._streamed += len(data)
        text = capture.decoder.decode(data)
        if text:
            self._on_output("stdout" if childFD == 1 else "stderr", text)
        if self._streamed >= STREAM_CAP_BYTES:
            self._on_output("log", "live output truncated; the result has the rest")

    def processExited(self, reason: Failure) -> None:
        self._kill_group()

    def processEnded(self, reason: Failure) -> None:
        if self._finished:
            return
        stdout = self._captures[1].text()
        stderr = self._captures[2].text()
        if isinstance(reason.value, ProcessDone):
            result = "" if stdout or stderr else NO_OUTPUT
            self._finish(
                ActionResult(True, result=result, stdout=stdout, stderr=stderr, exit_code=0)
            )
            return
        assert isinstance(reason.value, ProcessTerminated)
        code = reason.value.exitCode
        if code is None:
            error = f"command killed by signal {reason.value.signal}"
            self._finish(ActionResult(False, stdout=stdout, stderr=stderr, error=error))
            return
        self._finish(
            ActionResult(
                False,
                stdout=stdout,
                stderr=stderr,
                error=f"command failed: exit status {code}",
                exit_code=code,
            )
        )

    # stopping

    def cancel(self, reason: str = "cancelled") -> None:
        """Kill the process group at once and finish with ``reason`` as the error."""
        self._stop(ActionResult.failed(reason))

    def _timed_out(self) -> None:
        self._timer = None
        self._stop(
            ActionResult(
                False,
                stdout=self._captures[1].text(),
                stderr=self._captures[2].text(),
                error=f"command timed out after {self._timeout} seconds",
            )
        )

    def _stop(self, result: ActionResult) -> None:
        if self._finished:
            return
        self._kill_group()
        if self._launch.kill_argv:
            killer = self._launch.kill_argv
            self._spawner.spawnProcess(ProcessProtocol(), killer[0], killer, env=None)
        if self.transport is not None:
            self.transport.loseConnection()
        self._finish(result)

    def _kill_group(self) -> None:
        if self._pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pid, signal.SIGKILL)

    def _finish(self, result: ActionResult) -> None:
        if self._finished:
            return
        self._finished = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self.done.callback(result)
