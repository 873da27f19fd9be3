"""The AMP commands between ``--workers`` processes and their supervisor's state hub.

Why AMP (``twisted.protocols.amp``): it is in Twisted already, frames typed arguments over any
stream (here a Unix socket), matches answers to questions by tag and lets either side call the
other -- the hub pushes bus messages to the workers over the same connection.  One connection
per worker, so the order of its messages is the order they were sent: a release can never
overtake the reservation it gives back, nor a commit its queued debit.

Operations that only tell (a hold given back, a debit queued or committed, a forget) are
answered with nothing and never waited for: the settlement path never waits on the hub, as it
never waits on Redis.
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


class Publish(amp.Command):
    """A bus message for every worker (the sender too, as Redis does)."""

    arguments = [(b"channel", amp.Unicode()), (b"message", LongBytes())]
    response = []  # type: ignore[var-annotated]


class Deliver(amp.Command):
    """Hub -> worker: one bus message; answered once the worker's subscribers ran (so the
    publisher hears back only when every worker dropped what the message invalidates)."""

    arguments = [(b"channel", amp.Unicode()), (b"message", LongBytes())]
    response = []  # type: ignore[var-annotated]


class Batch(amp.Command):
    """Every operation a worker asked or told during one turn of its reactor, in order.

    ``ops`` is an orjson list of ``[name, *arguments]`` (``gateway.hub.operations`` names
    them); ``results`` the list of their answers, ``null`` for those that only tell.  One box
    per turn instead of one per operation: at high concurrency most of the cost of talking to
    the hub was AMP's framing of each small message, on both sides.
    """

    arguments = [(b"ops", LongBytes())]
    response = [(b"results", LongBytes())]


class Barrier(amp.Command):
    """Answered once every message sent before it was handled (tests and shutdown)."""

    arguments = []  # type: ignore[var-annotated]
    response = []  # type: ignore[var-annotated]


class Recall(amp.Command):
    """Hub -> worker: give back the free part of your allowances on a user's (``kind`` "user")
    or a key's ("key") account -- an admission elsewhere does not fit without it.  Answered
    with an orjson list of ``[user id, key id, amount given back]``."""

    arguments = [(b"kind", amp.Unicode()), (b"ident", amp.Integer())]
    response = [(b"returned", LongBytes())]
