"""Gateway rate limits: the global limiter (§4.1) and the per-user-channel limiter (§4.2).

Both count in ``SharedState`` fixed 60-second windows so that every process and node shares one
count (the origin counted per process).  The two differ on purpose, as the contract says:

- global: capacity ``rate_limit_requests_per_minute + rate_limit_burst`` per identity (API key
  id, else user id, else client IP); refused calls count too (``state.hit``), so a client
  hammering while refused stays refused; no ``X-RateLimit-*`` headers.
- per user channel: capacity ``rpm + burst`` of the user channel per (user, user channel);
  only admitted calls count (``state.take_all``); ``X-RateLimit-Limit``/``-Remaining`` on every
  answer while the limit is active.

Verdicts carry the headers and, when refused, the ``GatewayError`` to answer with; writing them
to the response is the route's job.  A failing shared store raises: the pipeline decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway import errors
from gateway.frozen_init import direct_init
from gateway.settings.store import Settings
from gateway.state.memory import MemoryState
from gateway.state.protocol import SharedState, WindowVerdict

WINDOW_SECONDS = 60
PREFIX = "lockgate:rl"
#: window keys each limiter keeps formatted (cleared when full: they are only strings)
KEYS_KEPT = 10_000


@direct_init
@dataclass(frozen=True)
class Verdict:
    """A limiter's answer; ``error`` is set exactly when the call is refused."""

    allowed: bool
    headers: dict[str, str] = field(default_factory=dict)
    error: errors.GatewayError | None = None


ADMIT = Verdict(True)


@direct_init
@dataclass(frozen=True)
class UserChannelLimit:
    """The rate-limit columns of one user channel."""

    user_channel_id: int
    enabled: bool
    requests_per_minute: int
    burst: int

    @property
    def capacity(self) -> int:
        """Requests per window, or 0 when the limit is off (disabled or rpm <= 0)."""
        if not self.enabled or self.requests_per_minute <= 0:
            return 0
        return self.requests_per_minute + max(0, self.burst)


def global_identity(api_key_id: int | None, user_id: int | None, client_ip: str) -> str:
    """Who the global window belongs to: the API key, else the (JWT) user, else the IP."""
    if api_key_id is not None:
        return f"key:{api_key_id}"
    if user_id is not None:
        return f"user:{user_id}"
    return f"ip:{client_ip}"


class GatewayLimiter:
    """Both limiters over one ``SharedState``.

    Without Redis the state is this process's ``MemoryState``: its windows are then asked
    directly (``hit_now``/``take_now``), the same counts and verdicts without a Deferred per
    request; the keys of each identity and user channel are kept (bounded) rather than
    formatted per call.
    """

    def __init__(self, state: SharedState, settings: Settings) -> None:
        self._state = state
        self._settings = settings
        self._memory = state if isinstance(state, MemoryState) else None
        self._global_keys: dict[str, str] = {}
        self._channel_keys: dict[tuple[int, int], str] = {}

    def _global_key(self, identity: str) -> str:
        key = self._global_keys.get(identity)
        if key is None:
            if len(self._global_keys) >= KEYS_KEPT:
                self._global_keys.clear()
            key = self._global_keys[identity] = f"{PREFIX}:g:{identity}"
        return key

    def _channel_key(self, user_channel_id: int, user_id: int) -> str:
        pair = (user_channel_id, user_id)
        key = self._channel_keys.get(pair)
        if key is None:
            if len(self._channel_keys) >= KEYS_KEPT:
                self._channel_keys.clear()
            key = self._channel_keys[pair] = f"{PREFIX}:uc:{user_channel_id}:{user_id}"
        return key

    def global_capacity(self) -> int:
        """Requests per window for the global limiter, 0 when it is off."""
        if not self._settings.flag("rate_limit_enabled"):
            return 0
        rpm = self._settings.integer("rate_limit_requests_per_minute", 60)
        if rpm <= 0:
            return 0
        return rpm + max(0, self._settings.integer("rate_limit_burst", 10))

    async def check_global(self, identity: str) -> Verdict:
        """Count this call against ``identity``'s window (see ``global_identity``)."""
        now = self.check_global_now(identity)
        if now is not None:
            return now
        capacity = self.global_capacity()
        if capacity <= 0:
            return ADMIT
        return _global_verdict(
            await self._state.hit(self._global_key(identity), capacity, WINDOW_SECONDS))

    def check_global_now(self, identity: str) -> Verdict | None:
        """``check_global``'s verdict at once when the windows are this process's memory --
        no coroutine per request -- or None when they are shared (Redis): await
        ``check_global`` then."""
        memory = self._memory
        if memory is None:
            return None
        capacity = self.global_capacity()
        if capacity <= 0:
            return ADMIT
        return _global_verdict(
            memory.hit_now(self._global_key(identity), capacity, WINDOW_SECONDS))

    async def check_user_channel(self, user_id: int, limit: UserChannelLimit) -> Verdict:
        """Admit and count one call of ``user_id`` through the primary target's user channel."""
        now = self.check_user_channel_now(user_id, limit)
        if now is not None:
            return now
        capacity = limit.capacity
        if capacity <= 0:
            return ADMIT
        key = self._channel_key(limit.user_channel_id, user_id)
        verdict = await self._state.take_all([(key, capacity)], WINDOW_SECONDS)
        return _user_channel_verdict(verdict, capacity, limit.user_channel_id)

    def check_user_channel_now(self, user_id: int, limit: UserChannelLimit) -> Verdict | None:
        """``check_user_channel``'s verdict at once, or None (see ``check_global_now``)."""
        memory = self._memory
        if memory is None:
            return None
        capacity = limit.capacity
        if capacity <= 0:
            return ADMIT
        return _user_channel_verdict(
            memory.take_now(self._channel_key(limit.user_channel_id, user_id), capacity,
                            WINDOW_SECONDS), capacity, limit.user_channel_id)


def _global_verdict(verdict: WindowVerdict) -> Verdict:
    if verdict.allowed:
        return ADMIT
    error = errors.rate_limited(verdict.retry_after)
    return Verdict(False, dict(error.headers), error)


def _user_channel_verdict(verdict: WindowVerdict, capacity: int,
                          user_channel_id: int) -> Verdict:
    headers = {
        "X-RateLimit-Limit": str(capacity),
        "X-RateLimit-Remaining": str(max(0, verdict.remaining) if verdict.allowed else 0),
    }
    if verdict.allowed:
        return Verdict(True, headers)
    error = errors.user_channel_rate_limited(verdict.retry_after, user_channel_id, headers)
    return Verdict(False, dict(error.headers), error)
