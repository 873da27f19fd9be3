"""The process's open-file limit, raised at start to what its stream capacity needs.

Every open stream holds two sockets (the client's and the upstream's), so a process meant to
hold ``STREAM_CAPACITY`` streams needs twice that many file descriptors plus some for the
database, logs and listeners.  Many systems start services with a soft ``RLIMIT_NOFILE`` of
1,024: past ~500 streams ``accept()`` fails with EMFILE and clients see resets, nothing in
the log says why.  The soft limit may be raised up to the hard limit without privileges, so
at start it is raised to what the capacity needs (or to the hard limit when that is lower),
and one log line says so; a limit that is already high enough is left alone.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from twisted.logger import Logger

log = Logger()

#: concurrent streams one process is built to hold (issue 22: 10,000 on one process)
STREAM_CAPACITY = 10_000
#: descriptors per open stream: the client's socket and the upstream's
FDS_PER_STREAM = 2
#: descriptors for everything else: listeners, database files, logs, idle pooled connections
RESERVED_FDS = 1_024


@dataclass(frozen=True)
class LimitChange:
    """What ``raise_open_file_limit`` did: the soft limit before and after."""

    before: int
    after: int
    wanted: int

    @property
    def enough(self) -> bool:
        return self.after >= self.wanted


def needed_fds(capacity: int) -> int:
    return capacity * FDS_PER_STREAM + RESERVED_FDS


def raise_open_file_limit(capacity: int = STREAM_CAPACITY) -> LimitChange | None:
    """Raise the soft ``RLIMIT_NOFILE`` to what ``capacity`` streams need (at most the hard
    limit) and log one line; None (and no line) when the soft limit was already enough."""
    wanted = needed_fds(capacity)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return None
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target <= soft:
        change = LimitChange(soft, soft, wanted)
    else:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        change = LimitChange(soft, target, wanted)
    streams = max(0, (change.after - RESERVED_FDS) // FDS_PER_STREAM)
    if change.enough:
        log.info("Raised the open-file limit from {before} to {after} (room for {capacity} "
                 "concurrent streams)", before=change.before, after=change.after,
                 capacity=capacity)
    else:
        log.warn("Open-file limit set to {after}, the hard limit (was {before}): room for about "
                 "{streams} concurrent streams of the {capacity} this process is built for "
                 "(raise the hard limit, e.g. LimitNOFILE={wanted} or ulimit -Hn {wanted})",
                 before=change.before, after=change.after, streams=streams,
                 capacity=capacity, wanted=wanted)
    return change
