"""Channel health on this node: short cooldowns after repeated failures, auto-disable on 401/403.

Three ways a channel stops receiving traffic, and how each one ends:

- **Cooldown** (here, in memory): after ``failures_before_cooldown`` consecutive failures
  (transport errors, timeouts, upstream 429/5xx) the channel is skipped by routing for
  ``cooldown_seconds``; the cooldown ends by itself on the clock.  After it ends the channel is
  "half open": one more failure starts a new cooldown at once, one success clears the count.
  Keeping this per node is acceptable because it is only an optimisation -- it spares callers
  the latency of a channel that is failing right now.  Each node learns it from its own
  traffic within a few requests, a restart forgets it harmlessly, and routing still tries a
  cooling channel when nothing else is left.
- **Auto-disable** (persisted by the injected callback): an upstream 401/403 means *our*
  channel credential is wrong or revoked, which will not heal with time.  ``on_auto_disable``
  is called once (the composition root stores ``channels.auto_disabled_at``/``_reason`` and
  announces the catalog so every node drops the channel).  It comes back only when an admin
  re-enables it; ``reset`` then clears this node's memory of it.
- **Failure counts** (persisted through the injected ``HealthJournal``): every failure that
  counts here also adds one to ``channels.consecutive_failures`` with its reason and time, and
  the first success after failures sets it back to zero -- so the operator and every process
  see them (``GET /api/channels``), while the cooldown decision itself stays in memory.
- **Admin-disabled** (``channels.enabled`` false): not a candidate at all, never considered
  here, and never comes back by itself.

Caller-side 4xx answers (400/404/409/413/422) say nothing about the channel's health: they
neither count as failures nor clear the failure count.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from gateway.channels.health_journal import HealthJournal

log = Logger()

AutoDisable = Callable[[int, str], Coroutine[Any, Any, None]]
#: the failure count the database held when the catalog was last loaded
PersistedFailures = Callable[[int], int]

#: upstream statuses that mean our channel credential failed
CREDENTIAL_FAILURES = frozenset({401, 403})
#: upstream statuses that blame the caller's request, not the channel
CALLER_FAULTS = frozenset({400, 404, 409, 413, 422})


@dataclass
class ChannelState:
    """What this node currently knows about one channel."""

    consecutive_failures: int = 0
    cooling_until: float = 0.0
    last_failure_at: float | None = None
    last_failure_reason: str = ""
    auto_disabled: bool = False


class ChannelHealth:
    def __init__(
        self,
        clock: IReactorTime,
        *,
        failures_before_cooldown: int = 3,
        cooldown_seconds: float = 30,
        on_auto_disable: AutoDisable | None = None,
        journal: HealthJournal | None = None,
        persisted_failures: PersistedFailures | None = None,
    ) -> None:
        self._clock = clock
        self._threshold = max(1, failures_before_cooldown)
        self._cooldown = cooldown_seconds
        self._on_auto_disable = on_auto_disable
        self._channels: dict[int, ChannelState] = {}
        self._journal = journal
        self._persisted_failures = persisted_failures
        #: channels whose persisted count this node has set to zero since their last failure
        self._cleared: set[int] = set()

    def state(self, channel_id: int) -> ChannelState:
        """A copy of the channel's state (a fresh one for a channel never seen)."""
        found = self._channels.get(channel_id)
        return ChannelState(**vars(found)) if found else ChannelState()

    def is_cooling(self, channel_id: int) -> bool:
        found = self._channels.get(channel_id)
        return found is not None and found.cooling_until > self._clock.seconds()

    def is_auto_disabled(self, channel_id: int) -> bool:
        """True once this node has asked for the channel to be disabled (until ``reset``)."""
        found = self._channels.get(channel_id)
        return found is not None and found.auto_disabled

    def is_available(self, channel_id: int) -> bool:
        """Neither cooling nor auto-disabled here (what routing passes as its filter)."""
        return not (self.is_cooling(channel_id) or self.is_auto_disabled(channel_id))

    def record_success(self, channel_id: int) -> None:
        found = self._channels.get(channel_id)
        if found is None:
            if (self._journal is not None and self._persisted_failures is not None
                    and channel_id not in self._cleared
                    and self._persisted_failures(channel_id)):
                self._cleared.add(channel_id)
                self._journal.recovered(channel_id)
            return
        if self._journal is not None:
            self._cleared.add(channel_id)
            self._journal.recovered(channel_id)
        found.consecutive_failures = 0
        found.cooling_until = 0.0
        if not found.auto_disabled:
            del self._channels[channel_id]

    def record_failure(
        self, channel_id: int, reason: str, status: int | None = None
    ) -> Deferred[None]:
        """Count a failed attempt (``status`` = upstream status, None for transport errors).

        Returns a Deferred that fires once any auto-disable callback has finished.  Errors in
        the callback are logged, never raised, and leave the channel usable so that the next
        401/403 tries to persist again; callers on the hot path need not wait for it.
        """
        if status in CALLER_FAULTS:
            return succeed(None)
        found = self._channels.setdefault(channel_id, ChannelState())
        found.last_failure_at = self._clock.seconds()
        found.last_failure_reason = reason
        if self._journal is not None:
            self._cleared.discard(channel_id)
            self._journal.failed(channel_id, reason)
        if status in CREDENTIAL_FAILURES:
            return self._auto_disable(channel_id, found, reason)
        found.consecutive_failures += 1
        if found.consecutive_failures >= self._threshold:
            found.cooling_until = self._clock.seconds() + self._cooldown
        return succeed(None)

    def _auto_disable(self, channel_id: int, found: ChannelState, reason: str) -> Deferred[None]:
        if found.auto_disabled:
            return succeed(None)
        found.auto_disabled = True
        if self._on_auto_disable is None:
            return succeed(None)
        done: Deferred[None] = ensureDeferred(self._on_auto_disable(channel_id, reason))

        def failed(failure: Any) -> None:
            # not persisted: let the next credential failure try again
            found.auto_disabled = False
            log.failure("auto-disable of channel {channel_id} failed", failure,
                        channel_id=channel_id)

        done.addErrback(failed)
        return done

    def flush(self) -> Deferred[None]:
        """Fires once every failure count recorded so far is persisted."""
        return self._journal.flush() if self._journal is not None else succeed(None)

    def reset(self, channel_id: int) -> None:
        """Forget the channel (an admin re-enabled it, or it was edited or deleted)."""
        self._channels.pop(channel_id, None)
