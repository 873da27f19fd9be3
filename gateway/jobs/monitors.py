"""Status monitor checks and the scheduler that runs them (console contract §5.14).

A check is one HTTP request (``up`` for a final status 200-399, else ``down`` with ``HTTP
<code>``; the body is never read) or one TCP connect (``up``, ``TCP connected``).  Any error --
refused, unreachable, timed out, refused by the URL policy -- is ``down`` with the error text
(at most 500 characters).  The target is checked against the URL policy when saved and again
at check time, including the address its name resolves to.  Timeouts run on the injected
clock so tests can drive a "slow" target; latency is measured on the reactor's own time.

``MonitorScheduler`` is a Twisted service: every ``tick_seconds`` (10) on the clock, when the
``status_monitor_enabled`` setting is on, it checks each enabled monitor whose last check is at
least ``interval_seconds`` old, at most ``concurrency`` at a time.  Ticks never overlap; one node
of several runs each tick (a short claim in shared state).  ``stopService`` cancels checks in
flight, so shutdown never waits on a slow target.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from twisted.internet.defer import (
    CancelledError,
    Deferred,
    DeferredList,
    DeferredSemaphore,
    ensureDeferred,
)
from twisted.internet.endpoints import connectProtocol
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from gateway.channels.net_policy import UnsafeUrl, UrlPolicy, check_url
from gateway.channels.safe_connect import AddressVetter, GuardedEndpoint, refusal_of
from gateway.jobs.periodic import RoundService
from gateway.store import monitors as store
from gateway.sync.fetch import MAX_MESSAGE, FetchError, FetchRefused, describe, fetch

log = Logger()

HTTP = "http"
TCP = "tcp"
CHECK_TIMEOUT = 10.0
TICK_SECONDS = 10.0
CLAIM_KEY = "lockgate:status-monitors:tick"


@dataclass(frozen=True)
class CheckOutcome:
    status: str
    latency_ms: int
    status_code: int
    message: str

    def row(self) -> dict[str, Any]:
        return asdict(self)


class TargetError(ValueError):
    """The monitor target is not a usable URL / ``host:port``."""


def tcp_address(target: str) -> tuple[str, int]:
    """``host:port`` or a URL (port defaults to 80/443 by scheme) -> ``(host, port)``."""
    text = target.strip()
    if "://" in text:
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            raise TargetError("invalid port") from None
        if port is None:
            port = {"http": 80, "https": 443}.get(parts.scheme.lower())
        host = parts.hostname or ""
    else:
        parts = urlsplit("//" + text)
        try:
            port = parts.port
        except ValueError:
            raise TargetError("invalid port") from None
        host = parts.hostname or ""
        if parts.path not in ("", "/"):
            raise TargetError("expected host:port")
    if not host:
        raise TargetError("target has no host")
    if not port:
        raise TargetError("a port is required")
    return host, port


def check_target(check_type: str, target: str, policy: UrlPolicy) -> str:
    """Validate a target against its type and the URL policy; returns it stripped."""
    text = target.strip()
    try:
        if check_type == TCP:
            host, port = tcp_address(text)
            bracketed = f"[{host}]" if ":" in host else host
            check_url(f"http://{bracketed}:{port}/", policy)
        else:
            check_url(text, policy)
    except (UnsafeUrl, TargetError) as exc:
        raise TargetError(str(exc)) from None
    return text


class _Connected(Protocol):
    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.loseConnection()


async def _tcp_connect(reactor: Any, clock: Any, host: str, port: int, timeout: float,
                       policy: UrlPolicy) -> None:
    endpoint = GuardedEndpoint(reactor, AddressVetter(reactor, clock), host, port, policy,
                               timeout=timeout)
    attempt: Deferred[Any] = connectProtocol(endpoint, _Connected())
    timer = clock.callLater(timeout, attempt.cancel)
    try:
        await attempt
    except CancelledError:
        if timer.active():
            raise
        raise FetchError(f"timeout after {timeout:g}s") from None
    except Exception:
        failure = Failure()
        refused = refusal_of(failure.value)
        if refused is not None:
            raise FetchRefused(f"unsafe address for {refused}"[:MAX_MESSAGE]) from None
        raise FetchError(describe(failure)[:MAX_MESSAGE]) from None
    finally:
        if timer.active():
            timer.cancel()


async def run_check(reactor: Any, clock: Any, monitor: dict[str, Any], policy: UrlPolicy,
                    timeout: float = CHECK_TIMEOUT) -> CheckOutcome:
    """Check one monitor row now; never raises for a failing target."""
    started = reactor.seconds()

    def elapsed() -> int:
        return max(0, round((reactor.seconds() - started) * 1000))

    check_type = monitor["check_type"]
    try:
        target = check_target(check_type, monitor["target_url"], policy)
        if check_type == TCP:
            host, port = tcp_address(target)
            await _tcp_connect(reactor, clock, host, port, timeout, policy)
            return CheckOutcome("up", elapsed(), 0, "TCP connected")
        method = "HEAD" if monitor["method"] == "HEAD" else "GET"
        fetched = await fetch(reactor, clock, target, method=method, timeout=timeout,
                              read_body=False, policy=policy)
    except TargetError as exc:
        return CheckOutcome("down", elapsed(), 0, f"Unsafe or invalid target URL: {exc}"[
            :MAX_MESSAGE])
    except FetchError as exc:
        return CheckOutcome("down", elapsed(), 0, str(exc)[:MAX_MESSAGE])
    status = "up" if 200 <= fetched.status <= 399 else "down"
    return CheckOutcome(status, elapsed(), fetched.status, f"HTTP {fetched.status}")


class MonitorRunner:
    """Runs a check for a stored monitor and records it."""

    def __init__(self, reactor: Any, clock: Any, db: Any, settings: Callable[[], Any], *,
                 timeout: float = CHECK_TIMEOUT) -> None:
        self.reactor = reactor
        self._clock = clock
        self._db = db
        self._settings = settings
        self._timeout = timeout

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.seconds(), UTC)

    async def check(self, monitor: dict[str, Any]) -> dict[str, Any] | None:
        """Check and record; the stored check row (None if the monitor vanished)."""
        policy = UrlPolicy.from_settings(self._settings())
        outcome = await run_check(self.reactor, self._clock, monitor, policy, self._timeout)
        stored: dict[str, Any] | None = await self._db.transaction(
            store.record_check, monitor["id"], outcome.row(), self.now())
        return stored

    async def check_id(self, monitor_id: int) -> dict[str, Any] | None:
        monitor = await self._db.transaction(store.get_monitor, monitor_id)
        return await self.check(monitor)


class MonitorScheduler(RoundService):
    """Checks due monitors every ``tick_seconds`` while ``status_monitor_enabled`` is on."""

    failure_message = "status monitor round failed"

    def __init__(self, runner: MonitorRunner, clock: Any, db: Any, state: Any,
                 settings: Callable[[], Any], *, concurrency: int = 8,
                 tick_seconds: float = TICK_SECONDS) -> None:
        super().__init__(runner.reactor, clock, tick_seconds)
        self._runner = runner
        self._db = db
        self._state = state
        self._settings = settings
        self._semaphore = DeferredSemaphore(max(1, concurrency))

    def start_round(self) -> Coroutine[Any, Any, None]:
        return self._round()

    async def _round(self) -> None:
        if not self._settings().flag("status_monitor_enabled"):
            return
        if not await self._state.claim(CLAIM_KEY, max(1, int(self._tick_seconds) - 1)):
            return
        due = await self._db.transaction(store.due_monitors, self._runner.now())
        checks = [self._start(monitor) for monitor in due]
        if checks:
            await DeferredList(checks, consumeErrors=True)

    def _start(self, monitor: dict[str, Any]) -> Deferred[Any]:
        check = self.track(
            self._semaphore.run(lambda: ensureDeferred(self._runner.check(monitor))))

        def finished(result: Any) -> Any:
            if isinstance(result, Failure) and not result.check(CancelledError):
                log.failure("status monitor {id} check failed", result, id=monitor["id"])
                return None
            return result

        check.addBoth(finished)
        return check
