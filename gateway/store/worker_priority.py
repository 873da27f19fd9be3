"""The database threads run at a lower CPU priority than the reactor thread.

Why (issue 22, goal 3): when the process is confined to one core, a settlement batch on the
database thread and the reactor take turns on that core.  Most of a batch's time is SQLite's C
code and the kernel writing the WAL (measured: ~0.8 ms of a 1-record batch's ~0.9 ms of CPU,
with the GIL released), so the GIL does not order them: the kernel's scheduler does.  At equal
priority a reactor woken by an upstream answer could wait for the batch's time slice, and
``bench/p99_trace.py`` showed the slowest c=1 requests overlapping a batch ~4x as often as the
median ones, with milliseconds of run-queue wait.  At a higher nice value the database thread
still gets every idle moment of the core, and a share of a busy one, but yields to the
reactor as soon as it wakes.

The nice value of a Linux thread is per thread (``setpriority`` on its thread id); raising it
needs no privilege.  Elsewhere (or where it fails) this does nothing.
"""

from __future__ import annotations

import os
import threading

#: added to the database threads' nice value: weight 110 against the reactor's 1024, so the
#: reactor preempts at once, while a saturated core still leaves the writer ~10 % of its time
DB_THREAD_NICE = 10

_lowered = threading.local()


def lower_this_thread(increment: int = DB_THREAD_NICE) -> None:
    """Raise the calling thread's nice value by ``increment``, once per thread."""
    if getattr(_lowered, "done", False):
        return
    _lowered.done = True
    setpriority = getattr(os, "setpriority", None)
    native_id = getattr(threading, "get_native_id", None)
    if setpriority is None or native_id is None:
        return
    try:
        tid = native_id()
        setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid)
                                              + increment))
    except OSError:
        pass  # not allowed here: the thread keeps the process's priority
