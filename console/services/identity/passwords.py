"""argon2id password hashing, always off the reactor thread (a hash costs ~100 ms)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

MIN_LENGTH = 8
#: upper bound so a megabyte "password" cannot be used to burn CPU
MAX_LENGTH = 1024


class Passwords:
    def __init__(self, reactor: IReactorThreads, hasher: PasswordHasher | None = None,
                 threads: int = 2) -> None:
        self._reactor = reactor
        self._hasher = hasher or PasswordHasher()
        self._pool = ThreadPool(minthreads=0, maxthreads=threads, name="lockgate-passwords")
        self._dummy = self._hasher.hash("lockgate-timing-equaliser")

    def start(self) -> None:
        self._pool.start()

    def stop(self) -> None:
        self._pool.stop()

    def hash(self, password: str) -> Deferred[str]:
        return deferToThreadPool(self._reactor, self._pool, self._hasher.hash, password)

    def verify(self, stored_hash: str | None, password: str) -> Deferred[bool]:
        """True when ``password`` matches; a missing hash still costs one verification."""
        return deferToThreadPool(self._reactor, self._pool, self._verify, stored_hash, password)

    def _verify(self, stored_hash: str | None, password: str) -> bool:
        try:
            self._hasher.verify(stored_hash or self._dummy, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        return stored_hash is not None
