"""When this process's users will send, in an open loop: every arrival a user holds, from the moment the user takes it
(`runtime.pacer.Pacer.take`) until its request leaves (`Pacer.until_due`).

A process runs everything on one event loop, and a greenlet that starts a piece of work is not interrupted until it
yields. So whatever is not a send makes way for the sends: the stream pump ends its parsing turn by the next one due
(`transport.pump.turn_end`); a request's end and report, the next request's build and the periodic results write start
only when no send is due before they would end (`runtime.pacer.make_way`). Between a due time and the request's first
byte there is then only the send itself, and the sends due just before it.

Pure: perf_counter instants in, decisions out; no gevent.
"""

from __future__ import annotations

import heapq
from itertools import count

STALE_S = 0.005
"""A send this long past its due time is no longer waited for: its user is late anyway (a busy loop, a build longer
than the time it was given) or will not send (its request failed to build); nothing waits on it for long."""


class DueSends:
    """The due instants (perf_counter s) of the requests this process's users are about to send."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []  # (due, handle); handles sent are dropped when they reach the top
        self._pending: set[int] = set()
        self._handles = count()

    def __len__(self) -> int:
        """Sends pending."""
        return len(self._pending)

    def add(self, t_s: float) -> int:
        """A user will send at perf_counter instant `t_s`; the handle to call `sent` with."""
        handle = next(self._handles)
        heapq.heappush(self._heap, (t_s, handle))
        self._pending.add(handle)
        return handle

    def sent(self, handle: int) -> None:
        """The request of `handle` left (or will not: its user stopped, a new plan took its arrival away)."""
        self._pending.discard(handle)

    def next_s(self, now_s: float) -> float | None:
        """The due instant of the earliest request not sent yet, at most `STALE_S` late at `now_s` (earlier ones are
        forgotten); None when there is none."""
        heap, pending = self._heap, self._pending
        while heap:
            t_s, handle = heap[0]
            if handle in pending and t_s > now_s - STALE_S:
                return t_s
            heapq.heappop(heap)
            pending.discard(handle)
        return None


SENDS = DueSends()
"""This process's (one pacer, one stream pump per process)."""
