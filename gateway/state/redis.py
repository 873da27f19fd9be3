"""``SharedState`` over Redis, so several Lockgate processes share limits, claims and a bus.

Semantics are exactly those of ``MemoryState`` (the contract tests run against both); only the
storage differs.  Two kinds of connection are kept, both reconnecting on their own:

- a small pool for commands (rate-limit scripts, counters, claims, PUBLISH);
- one subscriber connection for the bus.  A connection in subscribe mode cannot run other
  commands, hence the separation.  After a reconnect every channel with a live callback is
  subscribed again, so the bus survives Redis restarts and dropped connections.

Every key and channel is prefixed (default ``lockgate:``) so deployments or tests can share one
Redis.  A node receives its own publishes (Redis delivers to every subscriber), as with
``MemoryState``; ``Invalidation`` drops its own echo by node id.

Reachability is tracked (``available``) so that a lost Redis costs callers nothing: once the
state has been up, a command issued while Redis is known to be down fails at once with
``RedisUnavailable`` instead of waiting for a connection (admission then answers 503 at once
and ``/readyz`` says so).  Redis is known down from the moment the command pool has no
connection or the subscriber has none (or has not re-subscribed yet) -- a stopped or
restarted Redis closes them -- and when a heartbeat PING, sent every half second, goes
unanswered for 1.5 s: a hung Redis keeps its sockets open.  Then the pool's connections are
dropped too, so that commands waiting on them fail now rather than at their own ``timeout``
(default 5 s); it counts as back once a PING is answered again.  Before the first connection,
commands wait for it (bounded by the timeout), as start-up relies on.

Every return to ``available`` after the first calls the ``on_recovered`` callbacks: bus
messages sent while a node was cut off are lost, so listeners reload what they cache.  They run
once the subscriber has re-subscribed every channel, so nothing published after the reload
began can be missed.  Reconnect attempts back off to at most half a second, so a node is back
well within a second of Redis.

txredisapi imports the global reactor for its own timers; connections are made through
endpoints built on the reactor given here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import txredisapi
from twisted.internet.defer import Deferred, FirstError, fail, gatherResults, succeed
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.ssl import Certificate, optionsForClientTLS
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.state import redis_scripts
from gateway.state.protocol import SharedStateUnavailable, WindowVerdict
from gateway.state.redis_heartbeat import Heartbeat

log = Logger()

DEFAULT_PREFIX = "lockgate:"


class RedisUnavailable(SharedStateUnavailable, txredisapi.ConnectionError):
    """Redis is known to be unreachable: the command was not sent."""


def _never_if_lost(failure: Failure) -> Any:
    if failure.check(txredisapi.ConnectionError):
        return Deferred()
    return failure


class _HandshakeRetries:
    """AUTH/SELECT cut short by a dropped connection must not end reconnection.

    txredisapi gives up reconnecting for good when AUTH or SELECT fails, which is right for a
    refused password but wrong for a connection that merely dropped (a Redis restart, a TLS
    handshake that failed): such a reply is left pending forever, the half-made connection is
    discarded with it, and the reconnect loop carries on.
    """

    def auth(self, password: Any, username: Any = None) -> Deferred[Any]:
        d: Deferred[Any] = super().auth(password, username)  # type: ignore[misc]
        return d.addErrback(_never_if_lost)

    def select(self, index: int) -> Deferred[Any]:
        d: Deferred[Any] = super().select(index)  # type: ignore[misc]
        return d.addErrback(_never_if_lost)


class _CommandProtocol(_HandshakeRetries, txredisapi.RedisProtocol):
    pass


class _Factory(txredisapi.RedisFactory):
    """Reconnect soon after a drop and keep trying often (Redis back = node back within 1 s)."""

    protocol = _CommandProtocol
    initialDelay = 0.1
    maxDelay = 0.5


class _CommandFactory(_Factory):
    """The command pool; tells the owning ``RedisState`` when its size changes."""

    def __init__(self, owner: RedisState, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner = owner

    def addConnection(self, conn: Any) -> None:
        super().addConnection(conn)
        self.owner._reachability_changed()

    def delConnection(self, conn: Any) -> None:
        super().delConnection(conn)
        self.owner._reachability_changed()


class _SubscriberProtocol(_HandshakeRetries, txredisapi.SubscriberProtocol):
    """Hands each bus message to the owning ``RedisState``."""

    def messageReceived(self, pattern: Any, channel: Any, message: Any) -> None:
        self.factory.owner._deliver(channel, message)


class _SubscriberFactory(_Factory):
    """One subscriber connection; tells the owner each time it is (re)connected and usable."""

    protocol = _SubscriberProtocol

    def __init__(self, owner: RedisState, db: int | None, **kwargs: Any) -> None:
        super().__init__(None, db, 1, True, **kwargs)
        self.owner = owner

    def addConnection(self, conn: Any) -> None:
        super().addConnection(conn)
        if conn in self.pool:
            self.owner._subscriber_connected(conn)


class RedisState:
    """Rate-limit windows, counters, claims and a pub/sub bus, shared through Redis."""

    shared_across_processes = True

    def __init__(
        self,
        reactor: Any,
        host: str = "127.0.0.1",
        port: int = 6379,
        *,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        pool_size: int = 4,
        timeout: float = 5.0,
        tls: bool = False,
        ca_file: str | None = None,
    ) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self._reactor = reactor
        self._prefix = prefix
        self._prefix_bytes = prefix.encode()
        self._timeout = timeout
        endpoint: Any = HostnameEndpoint(reactor, host, port, timeout=max(1, int(timeout)))
        if tls:
            endpoint = wrapClientTLS(_tls_options(host, ca_file), endpoint)
        elif ca_file:
            raise ValueError("a CA file only applies to TLS (rediss://) connections")
        self._endpoint = endpoint
        common: dict[str, Any] = dict(
            charset=None, password=password, username=username, replyTimeout=timeout,
            convertNumbers=False,
        )
        dbid = db or None  # database 0 is where a connection starts: no SELECT needed
        self._commands_factory = _CommandFactory(self, f"{host}:{port}", dbid, pool_size, True,
                                                 **common)
        self._commands = self._commands_factory.handler
        self._subscriber_factory = _SubscriberFactory(self, dbid, **common)
        self._subscriber: Any = None
        #: the subscriber has re-subscribed every channel since it (re)connected
        self._subscriber_ready = False
        self._heartbeat = Heartbeat(
            reactor, self._commands.ping, lambda: self._commands_factory.size > 0,
            changed=self._reachability_changed, hang_up=self._drop_connections)
        self._available = False
        self._ever_available = False
        self._recovered_callbacks: list[Callable[[], None]] = []
        self._callbacks: dict[str, list[Callable[[bytes], None]]] = defaultdict(list)
        self._unacknowledged = 0
        self._settled_waiters: list[Deferred[None]] = []
        self._started = False
        self._stopped = False
        self._starting: Deferred[None] | None = None
        self._stopping: Deferred[None] | None = None

    @classmethod
    def from_url(cls, reactor: Any, url: str, **overrides: Any) -> RedisState:
        """``redis://[[user]:password@]host[:port][/db][?prefix=..&pool_size=..&timeout=..]``.

        ``rediss://`` connects with TLS; the server certificate must match the host and chain to
        the system's trust roots, or to the PEM file given as ``?ca=/path/ca.pem``.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(f"Redis URL must start with redis:// or rediss://, not {url!r}")
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"Redis database must be a number, not {path!r}")
        options: dict[str, Any] = {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 6379,
            "db": int(path or 0),
            "username": unquote(parts.username) if parts.username else None,
            "password": unquote(parts.password) if parts.password is not None else None,
            "tls": parts.scheme == "rediss",
        }
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        unknown = sorted(set(query) - {"prefix", "pool_size", "timeout", "ca"})
        if unknown:
            raise ValueError(f"unknown Redis URL option(s): {', '.join(unknown)}")
        if "prefix" in query:
            options["prefix"] = query["prefix"]
        if "pool_size" in query:
            options["pool_size"] = int(query["pool_size"])
        if "timeout" in query:
            options["timeout"] = float(query["timeout"])
        if "ca" in query:
            options["ca_file"] = query["ca"]
        options.update(overrides)
        return cls(reactor, **options)

    @property
    def prefix(self) -> str:
        return self._prefix

    # -- reachability ----------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """True while Redis answers: commands connected, subscriber subscribed, not hung."""
        return self._available

    def on_recovered(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` each time Redis is reachable again after being lost (not on the
        first connection); returns a function that removes it."""
        self._recovered_callbacks.append(callback)

        def remove() -> None:
            if callback in self._recovered_callbacks:
                self._recovered_callbacks.remove(callback)

        return remove

    def _reachability_changed(self) -> None:
        now = (not self._stopped and self._commands_factory.size > 0
               and self._subscriber is not None and self._subscriber_ready
               and not self._heartbeat.hung)
        if now == self._available:
            return
        self._available = now
        if not now:
            if not self._stopped:
                log.warn("Redis unreachable: admission refuses calls until it is back")
            return
        if not self._ever_available:
            self._ever_available = True
            self._heartbeat.start()
            return
        log.info("Redis reachable again")
        for callback in list(self._recovered_callbacks):
            try:
                callback()
            except Exception:
                log.failure("a Redis recovery callback failed")

    def _drop_connections(self) -> None:
        """Redis hangs: commands waiting on the pool fail now (503), not at their timeout."""
        for conn in list(self._commands_factory.pool):
            conn.transport.abortConnection()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Deferred[None]:
        """Connect; fires once the command pool and the subscriber (with its channels) are up.

        Fails if Redis refuses the credentials or the database; while Redis is unreachable it
        keeps retrying (and the returned Deferred waits).
        """
        if self._started:
            raise RuntimeError("RedisState.start() called twice")
        self._started = True
        pool_ready: Deferred[Any] = self._commands_factory.deferred
        subscriber_ready: Deferred[Any] = self._subscriber_factory.deferred
        self._commands_factory.startConnecting(self._endpoint)
        self._subscriber_factory.startConnecting(self._endpoint)
        ready: Deferred[Any] = gatherResults([pool_ready, subscriber_ready], consumeErrors=True)
        ready.addCallback(lambda _: self.settled())
        ready.addCallback(lambda _: None)
        ready.addErrback(_first_error)
        self._starting = ready
        ready.addBoth(self._started_or_failed)
        return ready

    def _started_or_failed(self, result: Any) -> Any:
        self._starting = None
        return result

    def stop(self) -> Deferred[None]:
        """Close every connection and stop reconnecting; pending waits are cancelled.

        Safe to call more than once (and before ``start``): later calls wait for the first.
        """
        if self._stopping is not None:
            return _follow(self._stopping)
        self._stopped = True
        self._reachability_changed()
        self._heartbeat.stop()
        if self._starting is not None:
            self._starting.cancel()
        waiters, self._settled_waiters = self._settled_waiters, []
        for waiter in waiters:
            waiter.cancel()
        done: Deferred[Any] = gatherResults(
            [self._commands_factory.disconnect(), self._subscriber_factory.disconnect()],
            consumeErrors=True)
        done.addCallback(lambda _: None)
        done.addErrback(_first_error)
        self._stopping = done
        return done

    # -- counters --------------------------------------------------------------------------

    def take_all(
        self, limits: Sequence[tuple[str, int]], window_seconds: int
    ) -> Deferred[WindowVerdict]:
        if not limits:
            return succeed(WindowVerdict(True, 0, 0))
        # a key listed twice is counted once and held to its smallest limit, as in memory
        strictest: dict[str, int] = {}
        for key, limit in limits:
            strictest[key] = min(limit, strictest.get(key, limit))
        keys = [self._prefix + key for key in strictest]
        args = [int(window_seconds * 1000), *strictest.values()]
        d = self._command(self._commands.eval, redis_scripts.TAKE_ALL, keys, args)
        return d.addCallback(_verdict)

    def hit(self, key: str, limit: int, window_seconds: int) -> Deferred[WindowVerdict]:
        d = self._command(self._commands.eval, redis_scripts.HIT, [self._prefix + key],
                          [int(window_seconds * 1000), limit])
        return d.addCallback(_verdict)

    def incr(self, key: str, amount: int = 1) -> Deferred[int]:
        d = self._command(self._commands.execute_command, "INCRBY", self._prefix + key, amount)
        return d.addCallback(int)

    def claim(self, key: str, ttl_seconds: int) -> Deferred[bool]:
        if ttl_seconds < 1:
            raise ValueError("claim ttl_seconds must be at least 1")
        d = self._command(self._commands.execute_command,
                          "SET", self._prefix + key, b"1", "EX", ttl_seconds, "NX")
        return d.addCallback(lambda reply: reply is not None)

    def release(self, key: str) -> Deferred[None]:
        d = self._command(self._commands.execute_command, "DEL", self._prefix + key)
        return d.addCallback(lambda _: None)

    def run_script(self, script: bytes, keys: Sequence[str],
                   args: Sequence[Any]) -> Deferred[list[int]]:
        """Run a Lua script atomically; ``keys`` are prefixed here, the reply is a list of
        integers (what every Lockgate script answers)."""
        d = self._command(self._commands.eval, script, [self._prefix + k for k in keys],
                          list(args))
        return d.addCallback(lambda reply: [int(v) for v in reply])

    def raw_command(self, *command: Any) -> Deferred[Any]:
        """One Redis command as given (keys NOT prefixed: callers name them in full)."""
        return self._command(self._commands.execute_command, *command)

    def _command(self, send: Callable[..., Deferred[Any]], *args: Any) -> Deferred[Any]:
        """Send a command unless Redis is known down; bound it (waiting for a connection
        included) by the timeout."""
        if self._ever_available and not self._available:
            return fail(RedisUnavailable("Redis is unreachable"))
        return send(*args).addTimeout(self._timeout, self._reactor)

    # -- bus -------------------------------------------------------------------------------

    def publish(self, channel: str, message: bytes) -> Deferred[None]:
        d = self._command(self._commands.execute_command,
                          "PUBLISH", self._prefix + channel, message)
        return d.addCallback(lambda _: None)

    def subscribe(self, channel: str, callback: Callable[[bytes], None]) -> Callable[[], None]:
        first = channel not in self._callbacks
        self._callbacks[channel].append(callback)
        if first and self._subscriber is not None:
            self._send(self._subscriber, "SUBSCRIBE", self._prefix + channel)

        def unsubscribe() -> None:
            callbacks = self._callbacks.get(channel)
            if not callbacks or callback not in callbacks:
                return
            callbacks.remove(callback)
            if not callbacks:
                del self._callbacks[channel]
                if self._subscriber is not None:
                    self._send(self._subscriber, "UNSUBSCRIBE", self._prefix + channel)

        return unsubscribe

    def settled(self) -> Deferred[None]:
        """Fires once Redis has confirmed every SUBSCRIBE/UNSUBSCRIBE sent so far.

        Until then a message published elsewhere may miss a just-added subscriber; tests and
        start-up wait on this.  While the subscriber is disconnected it waits for the reconnect.
        """
        if self._subscriber is not None and self._unacknowledged == 0:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._settled_waiters.append(waiter)
        return waiter

    def _send(self, conn: Any, *command: Any) -> None:
        # one channel per command: txredisapi pairs each reply with exactly one request
        self._unacknowledged += 1
        try:
            d = conn.execute_command(*command, apply_timeout=False)
        except txredisapi.ConnectionError:
            self._acknowledged(None)
            return
        d.addErrback(self._send_failed, command)
        d.addBoth(self._acknowledged)

    def _send_failed(self, failure: Failure, command: tuple[Any, ...]) -> None:
        # a dropped connection resubscribes everything on reconnect; on stop nothing matters
        if not self._stopped:
            log.info("Redis {command} failed: {error}", command=" ".join(map(str, command)),
                     error=failure.getErrorMessage())

    def _acknowledged(self, _: Any) -> None:
        self._unacknowledged -= 1
        if self._unacknowledged == 0 and self._subscriber is not None:
            waiters, self._settled_waiters = self._settled_waiters, []
            for waiter in waiters:
                waiter.callback(None)

    def _subscriber_connected(self, conn: Any) -> None:
        if self._stopped:
            return
        # notice a silently dead peer: a subscriber may otherwise wait for messages forever
        keepalive = getattr(conn.transport, "setTcpKeepAlive", None)
        if keepalive is not None:
            keepalive(1)
        conn.whenDisconnected().addCallback(self._subscriber_lost)
        self._subscriber = conn
        self._subscriber_ready = False
        # count the batch as one pending step so waiters fire after all of it; the PING proves
        # the connection works end to end (a TLS handshake is only complete once it answers)
        self._unacknowledged += 1
        self._send(conn, "PING")
        for channel in list(self._callbacks):
            self._send(conn, "SUBSCRIBE", self._prefix + channel)
        self._acknowledged(None)
        self.settled().addCallbacks(self._subscriber_settled, lambda _: None,
                                    callbackArgs=(conn,))

    def _subscriber_settled(self, _: Any, conn: Any) -> None:
        if self._subscriber is conn:
            self._subscriber_ready = True
            self._reachability_changed()

    def _subscriber_lost(self, conn: Any) -> None:
        if self._subscriber is conn:
            self._subscriber = None
            self._subscriber_ready = False
            self._reachability_changed()
            if not self._stopped:
                log.warn("Redis subscriber connection lost; reconnecting")

    def _deliver(self, channel: Any, message: Any) -> None:
        if isinstance(channel, str):
            channel = channel.encode()
        if isinstance(message, str):
            message = message.encode()
        if not channel.startswith(self._prefix_bytes):
            return
        name = channel[len(self._prefix_bytes):].decode("utf-8", "replace")
        for callback in list(self._callbacks.get(name, ())):
            try:
                callback(message)
            except Exception:
                log.failure("subscriber of {channel} failed", channel=name)


def _verdict(reply: Sequence[int]) -> WindowVerdict:
    allowed, remaining, pttl = (int(value) for value in reply)
    if allowed:
        return WindowVerdict(True, remaining, 0)
    return WindowVerdict(False, 0, max(1, math.ceil(pttl / 1000)))


def _tls_options(host: str, ca_file: str | None) -> Any:
    if ca_file is None:
        return optionsForClientTLS(host)
    with open(ca_file, "rb") as handle:
        return optionsForClientTLS(host, trustRoot=Certificate.loadPEM(handle.read()))


def _follow(source: Deferred[None]) -> Deferred[None]:
    """A Deferred firing (with None) once ``source`` has, leaving ``source``'s result alone."""
    follower: Deferred[None] = Deferred()

    def forward(result: Any) -> Any:
        follower.callback(None)
        return result

    source.addBoth(forward)
    return follower


def _first_error(failure: Failure) -> Failure:
    """Unwrap ``gatherResults``' FirstError so callers see the real cause."""
    if failure.check(FirstError):
        return failure.value.subFailure  # type: ignore[no-any-return]
    return failure
