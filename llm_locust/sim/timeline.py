"""Run callbacks at absolute `time.perf_counter()` times on one asyncio event loop.

One heap of (due_s, seq, callback) and one loop timer armed for the earliest entry. On each wake
every callback already due is run (so writes that fell due together go out together); a callback
returns the absolute time it wants to run next, or None. Scheduling at absolute times means
timer jitter never accumulates across a response.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable
from time import perf_counter

Callback = Callable[[float], "float | None"]
"""Called with the current perf_counter seconds; returns the next due time (s) or None to stop."""


class Timeline:
    """Absolute-time scheduler for one event loop; see the module docstring."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Callback]] = []
        self._seq = itertools.count()
        self._timer: asyncio.Handle | None = None
        self._timer_due_s = math.inf

    def at(self, due_s: float, callback: Callback) -> None:
        """Run `callback(now_s)` as soon as perf_counter() >= `due_s`."""
        heapq.heappush(self._heap, (due_s, next(self._seq), callback))
        if due_s < self._timer_due_s:
            self._arm(due_s)

    def _arm(self, due_s: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due_s = due_s
        # Event-loop timers have millisecond resolution (epoll takes whole ms): round up so the loop
        # never wakes early and busy-polls until due.
        delay_ms = math.ceil((due_s - perf_counter()) * 1e3)
        self._timer = self._loop.call_later(max(0, delay_ms) / 1e3, self._wake)

    def _wake(self) -> None:
        self._timer = None
        self._timer_due_s = math.inf
        heap = self._heap
        push = heapq.heappush
        pop = heapq.heappop
        seq = self._seq
        now_s = perf_counter()
        while heap:
            if heap[0][0] > now_s:
                now_s = perf_counter()
                if heap[0][0] > now_s:
                    break
            callback = pop(heap)[2]
            next_s = callback(now_s)
            if next_s is not None:
                push(heap, (next_s, next(seq), callback))
        if heap:
            self._arm(heap[0][0])
