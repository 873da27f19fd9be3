"""Which upstream targets a request tries, in which order, and when to move on to the next.

``plan`` turns the candidate channel-model configs of one request into the ordered list of
attempts (gateway contract §5):

1. candidates are ordered by channel priority desc, weight desc, channel id asc (config id asc
   breaks the remaining ties so the order is total);
2. when the API key lists two or more user channels, they form failover groups in the key's
   order; otherwise all candidates are one group;
3. in each group the first target is picked by the group's user-channel routing algorithm
   (``priority``: first; ``round_robin``: shared counter modulo count; ``weighted_round_robin``:
   shared counter modulo total weight, walking the candidates in order), followed (ours ⚑) by
   the group's other candidates in order as in-group failover, then the next group.

Counters come from an injected async ``counter(key) -> int`` (``SharedState.incr``) so that all
processes share one rotation; that is the only reason ``plan`` is async.  Candidates whose
channel is not available on this node (``gateway.health`` cooldown) are left out -- unless
*every* candidate is unavailable, in which case they are all planned as if healthy: trying a
cooling channel beats answering 503 when it may well have recovered.

``retryable`` says whether a failed attempt may fail over; ``Deadline`` keeps every attempt of
one request inside one overall time budget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from twisted.internet.interfaces import IReactorTime

from gateway.channels.channel_types import PRIORITY, ROUND_ROBIN, normalise_routing_algorithm
from gateway.channels.channel_types import WEIGHTED_ROUND_ROBIN as WEIGHTED_ROUND_ROBIN

COUNTER_PREFIX = "lockgate:route"

Counter = Callable[[str], Awaitable[int]]
Available = Callable[[int], bool]


@dataclass(frozen=True)
class Candidate:
    """One channel-model config that can serve the requested model."""

    config_id: int
    channel_id: int
    user_channel_id: int
    priority: int
    weight: int
    channel_type: str
    base_url: str
    upstream_model: str


@dataclass(frozen=True)
class UserChannelInfo:
    """The routing-relevant part of a user channel."""

    id: int
    routing_algorithm: str


#: stored algorithm names already normalised (a handful of distinct spellings)
_ALGORITHMS: dict[str | None, str] = {}
#: the ordered failover groups of recently planned candidate tuples (see ``_ordered``)
_ORDERED: dict[int, tuple[tuple[Candidate, ...], tuple[int, ...],
                          list[Candidate], list[list[Candidate]]]] = {}
_ORDERED_KEPT = 4096


def normalise_algorithm(name: str | None) -> str:
    """``priority``, ``round_robin`` or ``weighted_round_robin`` (unknown -> priority)."""
    found = _ALGORITHMS.get(name)
    if found is None:
        found = normalise_routing_algorithm(name or "")
        if len(_ALGORITHMS) < 64:
            _ALGORITHMS[name] = found
    return found


def order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Priority desc, weight desc, channel id asc, config id asc."""
    return sorted(candidates,
                  key=lambda c: (-c.priority, -c.weight, c.channel_id, c.config_id))


def groups(
    candidates: Sequence[Candidate], allowed_user_channels: Sequence[int]
) -> list[list[Candidate]]:
    """Failover groups: per user channel in the key's order when it lists two or more.

    Candidates are expected to be restricted to the key's user channels already (§5.2); with
    a list of two or more, a candidate outside it has no group and is not routed.
    """
    ordered = order(candidates)
    listed = list(dict.fromkeys(allowed_user_channels))
    if len(listed) < 2:
        return [ordered] if ordered else []
    split = [[c for c in ordered if c.user_channel_id == uc] for uc in listed]
    return [group for group in split if group]


def weighted_index(group: Sequence[Candidate], tick: int) -> int:
    """Index picked by weighted round robin for counter value ``tick`` (0-based)."""
    weights = [c.weight if c.weight > 0 else 1 for c in group]
    point = tick % sum(weights)
    for index, weight in enumerate(weights):
        if point < weight:
            return index
        point -= weight
    return len(group) - 1  # unreachable: point < sum(weights)


async def pick(
    group: Sequence[Candidate], algorithm: str, user_channel_id: int, model: str,
    counter: Counter,
) -> int:
    """Index of the group's first target under ``algorithm``."""
    if algorithm == PRIORITY or len(group) <= 1:
        return 0
    tick = await counter(f"{COUNTER_PREFIX}:{algorithm}:{user_channel_id}:{model}") - 1
    if algorithm == ROUND_ROBIN:
        return tick % len(group)
    return weighted_index(group, tick)


async def plan(
    candidates: Sequence[Candidate],
    user_channels: Mapping[int, UserChannelInfo],
    *,
    model: str,
    allowed_user_channels: Sequence[int],
    counter: Counter,
    available: Available | None = None,
) -> list[Candidate]:
    """The ordered attempts for one request; empty when there is no candidate (-> 503).

    ``model`` is the normalised model name (it keys the rotation counters);
    ``allowed_user_channels`` is the API key's ordered list (empty for JWT callers and
    unrestricted keys); ``available(channel_id)`` is the health filter.  A single group
    containing several user channels uses the algorithm of its first candidate's user
    channel.  The first attempt is the primary target (the one the per-user-channel rate
    limit checks); text routes try them all, other routes only the first group's.
    """
    ordered: list[list[Candidate]] | None = None
    if type(candidates) is tuple:
        pool, ordered = _ordered(candidates, allowed_user_channels)
    else:
        pool = list(dict.fromkeys(candidates))
    if available is not None:
        healthy = [c for c in pool if available(c.channel_id)]
        if healthy and len(healthy) != len(pool):
            pool, ordered = healthy, None
    if ordered is None:
        ordered = groups(pool, allowed_user_channels)
    attempts: list[Candidate] = []
    seen: set[int] = set()
    for group in ordered:
        user_channel_id = group[0].user_channel_id
        info = user_channels.get(user_channel_id)
        algorithm = normalise_algorithm(info.routing_algorithm if info else None)
        first = await pick(group, algorithm, user_channel_id, model, counter)
        for candidate in [group[first], *group[:first], *group[first + 1:]]:
            if candidate.config_id not in seen:
                seen.add(candidate.config_id)
                attempts.append(candidate)
    return attempts


def _ordered(candidates: tuple[Candidate, ...], allowed_user_channels: Sequence[int]
             ) -> tuple[list[Candidate], list[list[Candidate]]]:
    """The de-duplicated pool and its failover groups with every candidate healthy, kept
    per candidate tuple: the /v1 path plans the same tuple (cached per catalog snapshot) on
    every request, and a tuple cannot change.  Keyed by identity (the entry holds the tuple,
    so the id is not reused while it is kept); a reloaded snapshot brings new tuples."""
    allowed = tuple(allowed_user_channels)
    entry = _ORDERED.get(id(candidates))
    if entry is not None and entry[0] is candidates and entry[1] == allowed:
        return entry[2], entry[3]
    pool = list(dict.fromkeys(candidates))
    ordered = groups(pool, allowed)
    if len(_ORDERED) >= _ORDERED_KEPT:
        _ORDERED.clear()
    _ORDERED[id(candidates)] = (candidates, allowed, pool, ordered)
    return pool, ordered


def first_group(attempts: Sequence[Candidate]) -> list[Candidate]:
    """The leading attempts that share the primary's user channel (non-text routes)."""
    if not attempts:
        return []
    primary = attempts[0].user_channel_id
    result = []
    for candidate in attempts:
        if candidate.user_channel_id != primary:
            break
        result.append(candidate)
    return result


# --- when to fail over ----------------------------------------------------------------------

#: how an attempt failed
CONNECT_FAILED = "connect_failed"      # no connection (refused, DNS, TLS, connect timeout)
NO_RESPONSE = "no_response"            # connected, but no response head (first-byte timeout,
#                                        connection lost before the status line)
STATUS = "status"                      # the upstream answered with an error status
INVALID_RESPONSE = "invalid_response"  # a 2xx we could not read or convert
REQUEST_UNBUILDABLE = "request_unbuildable"  # this channel cannot take the request

#: 401/403 mean *this channel's* credential failed (the channel is auto-disabled on the spot,
#: contract §0): another channel holds another credential, so it is worth the next attempt
RETRYABLE_STATUSES = frozenset({401, 403, 429, 500, 502, 503})


@dataclass(frozen=True)
class Outcome:
    """What happened to one failed attempt."""

    kind: str
    status: int | None = None
    #: some bytes of the answer already went to the client (a stream had started)
    client_bytes_sent: bool = False
    #: the upstream accepted an asynchronous task (a retry could start a second one)
    task_accepted: bool = False


def retryable(outcome: Outcome) -> bool:
    """May the next attempt be tried?  Only while the client has seen nothing.

    Yes for connect failures, no response head (first-byte timeout), upstream 401/403 (our
    channel credential failed), 429/500/502/503, and a request this channel type cannot take
    (nothing was sent; §5.5); no for any other status (a 4xx is the caller's request, and the
    same request fails the same way elsewhere), for unreadable 2xx answers (the upstream may
    have done the work), once bytes reached the client, and once an async task was accepted.
    """
    if outcome.client_bytes_sent or outcome.task_accepted:
        return False
    if outcome.kind in (CONNECT_FAILED, NO_RESPONSE, REQUEST_UNBUILDABLE):
        return True
    if outcome.kind == STATUS:
        return outcome.status in RETRYABLE_STATUSES
    return False


class Deadline:
    """One time budget for all attempts of a request (started at construction)."""

    def __init__(self, clock: IReactorTime, seconds: float) -> None:
        self._clock = clock
        self.ends = clock.seconds() + seconds

    def remaining(self) -> float:
        return max(0.0, self.ends - self._clock.seconds())

    def expired(self) -> bool:
        return self.remaining() <= 0

    def timeout(self, per_attempt: float) -> float:
        """The timeout for the next attempt: ``per_attempt`` capped by what is left."""
        return min(per_attempt, self.remaining())
