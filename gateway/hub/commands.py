"""The AMP commands between ``--workers`` processes and their supervisor's state hub.

Why AMP (``twisted.protocols.amp``): it is in Twisted already, frames typed arguments over any
stream (here a Unix socket), matches answers to questions by tag and lets either side call the
other -- the hub pushes bus messages to the workers over the same connection.  One connection
per worker, so the order of its messages is the order they were sent: a release can never
overtake the reservation it gives back, nor a commit its queued debit.

Commands that only tell (``requiresAnswer = False``) cost the worker no round trip: the
settlement path never waits on the hub, as it never waits on Redis.
"""

from __future__ import annotations

from typing import Any

from twisted.protocols import amp

#: AMP limits one value to 65,535 bytes; bus messages are cut into parts of this size
PART = 60_000


class LongBytes(amp.Argument):
    """Bytes of any length, carried as ``name.0``, ``name.1``, ... (a bus message -- a links
    event with a task's output, say -- may exceed one AMP value; Redis has no such limit)."""

    def fromBox(self, name: bytes, strings: Any, objects: dict[str, Any], proto: Any) -> None:
        parts: list[bytes] = []
        while (key := name + b".%d" % len(parts)) in strings:
            parts.append(strings.pop(key))
        objects[name.decode()] = b"".join(parts)

    def toBox(self, name: bytes, strings: Any, objects: dict[str, Any], proto: Any) -> None:
        value: bytes = objects[name.decode()]
        for number, start in enumerate(range(0, max(1, len(value)), PART)):
            strings[name + b".%d" % number] = value[start:start + PART]


class TakeAll(amp.Command):
    """``SharedState.take_all``: admit only if every (key, limit) has room."""

    arguments = [(b"keys", amp.ListOf(amp.Unicode())), (b"limits", amp.ListOf(amp.Integer())),
                 (b"window", amp.Integer())]
    response = [(b"allowed", amp.Boolean()), (b"remaining", amp.Integer()),
                (b"retry_after", amp.Integer())]


class Hit(amp.Command):
    """``SharedState.hit``: count the call, admit while within the limit."""

    arguments = [(b"key", amp.Unicode()), (b"limit", amp.Integer()), (b"window", amp.Integer())]
    response = [(b"allowed", amp.Boolean()), (b"remaining", amp.Integer()),
                (b"retry_after", amp.Integer())]


class Incr(amp.Command):
    arguments = [(b"key", amp.Unicode()), (b"amount", amp.Integer())]
    response = [(b"value", amp.Integer())]


class Claim(amp.Command):
    arguments = [(b"key", amp.Unicode()), (b"ttl", amp.Integer())]
    response = [(b"claimed", amp.Boolean())]


class Release(amp.Command):
    arguments = [(b"key", amp.Unicode())]
    response = []  # type: ignore[var-annotated]


class Publish(amp.Command):
    """A bus message for every worker (the sender too, as Redis does)."""

    arguments = [(b"channel", amp.Unicode()), (b"message", LongBytes())]
    response = []  # type: ignore[var-annotated]


class Deliver(amp.Command):
    """Hub -> worker: one bus message."""

    arguments = [(b"channel", amp.Unicode()), (b"message", LongBytes())]
    requiresAnswer = False


class Reserve(amp.Command):
    """Hold ``amount`` of a balance (and a key quota); ``outcome`` is ``ok``, ``balance``
    (402 insufficient balance) or ``quota`` (402 key quota exceeded)."""

    arguments = [(b"request_id", amp.Unicode()), (b"user_id", amp.Integer()),
                 (b"key_id", amp.Integer(optional=True)), (b"amount", amp.Integer())]
    response = [(b"outcome", amp.Unicode())]


class GiveBack(amp.Command):
    """Release a reservation (idempotent)."""

    arguments = [(b"request_id", amp.Unicode())]
    requiresAnswer = False


class Settling(amp.Command):
    """A settlement was queued: the hold ``held`` (if any) becomes the queued debit ``ref``."""

    arguments = [(b"held", amp.Unicode()), (b"ref", amp.Unicode()), (b"user_id", amp.Integer()),
                 (b"key_id", amp.Integer(optional=True)), (b"cost", amp.Integer())]
    requiresAnswer = False


class Settled(amp.Command):
    """The batch holding debit ``ref`` committed ``charged`` (or was abandoned: absent)."""

    arguments = [(b"ref", amp.Unicode()), (b"charged", amp.Integer(optional=True))]
    requiresAnswer = False


class Forget(amp.Command):
    """Reload an account from the database on next use: ``kind`` is ``user``, ``key``,
    ``all-users`` or ``all-keys`` (``ident`` unused for the last two)."""

    arguments = [(b"kind", amp.Unicode()), (b"ident", amp.Integer())]
    requiresAnswer = False


class Barrier(amp.Command):
    """Answered once every message sent before it was handled (tests and shutdown)."""

    arguments = []  # type: ignore[var-annotated]
    response = []  # type: ignore[var-annotated]
