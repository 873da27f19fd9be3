"""A closed loop driven by ``wrk`` (a C load generator) instead of ``load.closed_loop``.

Why: on a 2-core machine the load generator shares the cores with what it measures.
``load.closed_loop`` is Python asyncio -- a tenth of a millisecond or more of CPU per request
-- so at the rates of ``--workers 2`` it takes a large share of the second core away from the
gateway.  ``wrk`` costs a few microseconds per request.  It sends one fixed request on
``concurrency`` persistent connections (a small Lua script sets the method, body and headers)
and reports what it did; its own CPU time is read from the kernel when it exits
(``os.wait4``), so every benchmark can say what the driver cost per request.

Used when ``wrk`` is on the ``PATH`` (``apt-get install wrk``); the benchmarks fall back to
``load.closed_loop`` otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_TOTAL = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_SOCKET_ERRORS = re.compile(
    r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


@dataclass
class WrkResult:
    requests: int
    seconds: float
    errors: int
    #: user + system CPU seconds of the wrk process (all its threads)
    cpu_seconds: float
    output: str

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def available() -> bool:
    return shutil.which("wrk") is not None


def _lua_string(text: str) -> str:
    """A double-quoted Lua string literal of ``text`` (every byte outside printable ASCII,
    and the quote and backslash, as a decimal escape)."""
    out = []
    for byte in text.encode():
        out.append(chr(byte) if 32 <= byte < 127 and byte not in (34, 92) else f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def script(body: bytes, headers: dict[str, str]) -> str:
    """The Lua script that makes every wrk request a ``POST`` of ``body``."""
    lines = ['wrk.method = "POST"', f"wrk.body = {_lua_string(body.decode())}"]
    for name, value in headers.items():
        lines.append(f"wrk.headers[{_lua_string(name)}] = {_lua_string(value)}")
    return "\n".join(lines) + "\n"


def parse(output: str) -> tuple[int, float, int]:
    """(requests, seconds, errors) from wrk's report; errors = non-2xx + socket errors."""
    total = _TOTAL.search(output)
    if total is None:
        raise ValueError(f"unexpected wrk output: {output[:500]!r}")
    requests = int(total.group(1))
    seconds = float(total.group(2)) * _UNITS[total.group(3)]
    errors = 0
    non_2xx = _NON_2XX.search(output)
    if non_2xx:
        errors += int(non_2xx.group(1))
    sockets = _SOCKET_ERRORS.search(output)
    if sockets:
        errors += sum(int(group) for group in sockets.groups())
    return requests, seconds, errors


def closed_loop(url: str, body: bytes, token: str, concurrency: int, seconds: float,
                threads: int = 2) -> WrkResult:
    """``concurrency`` connections sending ``body`` to ``url`` back to back for ``seconds``."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    with tempfile.TemporaryDirectory(prefix="lockgate-wrk-") as tmp:
        lua = Path(tmp) / "post.lua"
        lua.write_text(script(body, headers))
        command = ["wrk", "-t", str(min(threads, concurrency)), "-c", str(concurrency),
                   "-d", f"{max(1, round(seconds))}s", "-s", str(lua), url]
        with tempfile.TemporaryFile() as out:
            process = subprocess.Popen(command, stdout=out,  # noqa: S603
                                       stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            output = out.read().decode("utf-8", "replace")
    if process.returncode != 0:
        raise RuntimeError(f"wrk exited with {process.returncode}: {output[:500]}")
    requests, elapsed, errors = parse(output)
    return WrkResult(requests, elapsed, errors, usage.ru_utime + usage.ru_stime, output)
