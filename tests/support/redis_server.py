"""A real ``redis-server`` for the tests, on a free loopback port in a temp dir.

Started once per test session (lazily), stopped at exit.  Tests isolate themselves with a
fresh key prefix each (``fresh_prefix()``), so nothing needs flushing between tests; ``flushall``
is there for tests that want an empty server.  Skipped with a clear reason when redis-server is
absent; CI sets LOCKGATE_REQUIRE_SERVERS=1 so a missing server fails instead of skipping.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from typing import Any

from twisted.trial.unittest import SkipTest

_servers: dict[bool, RedisServer] = {}
_prefixes = itertools.count(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """With ``tls=True`` it only listens with TLS, using a throwaway CA (``self.ca_file``)."""

    def __init__(self, tls: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server not found on PATH")
        self.root = tempfile.mkdtemp(prefix="lockgate-redis-")
        self.port = _free_port()
        self.log = os.path.join(self.root, "redis.log")
        self.tls = tls
        self.ca_file = ""
        listen = ["--port", str(self.port)]
        if tls:
            self.ca_file, cert, key = make_certificates(self.root)
            listen = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", cert,
                      "--tls-key-file", key, "--tls-ca-cert-file", self.ca_file,
                      "--tls-auth-clients", "no"]
        self._argv = [binary, *listen, "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--dir", self.root, "--logfile", self.log,
                      "--daemonize", "no"]
        self._spawn()

    def _spawn(self) -> None:
        self.process = subprocess.Popen(
            self._argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    def halt(self) -> None:
        """Stop the server as an outage would (its clients see their connections close);
        ``resume`` starts it again, empty, on the same port."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(5)

    def resume(self) -> None:
        """Start the halted server again (empty: it persists nothing); returns once it
        answers PING."""
        self._spawn()

    def _wait_ready(self, seconds: float = 10.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}; "
                                   f"see {self.log}")
            try:
                if self.command("PING") == "PONG":
                    return
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not answer PING within 10 s")

    def command(self, *args: str | int, db: int = 0) -> Any:
        """Run one command synchronously (test setup and inspection) and return its reply.

        Integers come back as ``int``, bulk strings as ``bytes``, arrays as lists, status
        replies as ``str``; an error reply raises ``RuntimeError``.
        """
        commands = ([("SELECT", db)] if db else []) + [args]
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as plain:
            sock = plain
            if self.tls:
                context = ssl.create_default_context(cafile=self.ca_file)
                sock = context.wrap_socket(plain, server_hostname="127.0.0.1")
            sock.sendall(b"".join(_encode(command) for command in commands))
            reader = sock.makefile("rb")
            replies = [_read_reply(reader) for _ in commands]
        return replies[-1]

    def url(self, prefix: str | None = None, db: int = 0) -> str:
        if self.tls:
            base = f"rediss://127.0.0.1:{self.port}/{db}?ca={self.ca_file}"
            return f"{base}&prefix={prefix}" if prefix else base
        base = f"redis://127.0.0.1:{self.port}/{db}"
        return f"{base}?prefix={prefix}" if prefix else base

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def make_certificates(directory: str) -> tuple[str, str, str]:
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl CLI)."""
    if shutil.which("openssl") is None:
        raise FileNotFoundError("openssl not found on PATH")

    def path(name: str) -> str:
        return os.path.join(directory, name)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", path("ca.key"), "-out", path("ca.pem"), "-subj", "/CN=lockgate test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", path("server.key"),
            "-out", path("server.csr"), "-subj", "/CN=127.0.0.1")
    with open(path("server.ext"), "w") as handle:
        handle.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                     "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"),
            "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2",
            "-out", path("server.pem"), "-extfile", path("server.ext"))
    return path("ca.pem"), path("server.pem"), path("server.key")


def _encode(args: tuple[str | int, ...]) -> bytes:
    parts = [str(arg).encode() for arg in args]
    return b"*%d\r\n" % len(parts) + b"".join(
        b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)


def _read_reply(reader: Any) -> Any:
    line = reader.readline()
    if not line:
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.read(size + 2)[:-2]
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [_read_reply(reader) for _ in range(size)]
    raise RuntimeError(f"unexpected reply {line!r}")


def redis_server(tls: bool = False) -> RedisServer:
    """The shared (plain or TLS) test server (SkipTest when redis-server is unavailable)."""
    server = _servers.get(tls)
    if server is None:
        try:
            server = _servers[tls] = RedisServer(tls)
        except (FileNotFoundError, RuntimeError, subprocess.CalledProcessError) as exc:
            if os.environ.get("LOCKGATE_REQUIRE_SERVERS"):
                raise
            raise SkipTest(f"redis-server{' with TLS' if tls else ''} unavailable: {exc}") \
                from None
        atexit.register(server.stop)
    return server


def fresh_prefix() -> str:
    """A key/channel prefix no other test in this session uses."""
    return f"test{os.getpid()}.{next(_prefixes)}:"


def flushall() -> None:
    """Empty every database of the shared test server."""
    redis_server().command("FLUSHALL")
