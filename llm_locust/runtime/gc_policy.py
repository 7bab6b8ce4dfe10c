"""Python's garbage collector during a test: no collection pauses in the middle of the streams.

A collection stops the whole process. While it runs no socket is read, so every stream whose
next token arrives meanwhile gets two tokens in one read (one timestamp for both: a gap of 0,
then 2×ITL), and a request whose first two tokens merge has its TTFT one ITL late. Measured at
54k token events/s (560 streams, benchmarks/RESULTS.md): automatic collections paused the
process 5–16 ms several times per 15 s — the young generation held the ~20k objects of the
requests in flight — and most of the late TTFTs that put a run out of bound were read right
after such a pause.

A test's steady state makes no cyclic garbage (a full collection every 5 s at 560 streams found
none: what a request allocates is freed by reference counting when it ends), so in the processes
that run users `RunCollector` freezes the heap, switches automatic collection off while the
test runs and collects fully every `COLLECT_INTERVAL_S`: one pause of ~20 ms per interval instead
of several of 5–16 ms per 15 s, and rare cycles (failures' tracebacks) are still freed.
"""

from __future__ import annotations

import gc

import gevent

from llm_locust.transport.background import Background

COLLECT_INTERVAL_S = 30.0
"""Seconds between two full collections while a test runs."""


def freeze_heap() -> None:
    """Move everything alive now out of the garbage collector's reach.

    A full collection walks every tracked object — Locust, gevent and their modules: a pause
    of tens of ms. Frozen objects are never scanned again; what is allocated later is collected
    as usual.

    Histograms are cyclic garbage (hdrh: histogram <-> encoder): windows are released when
    done with (`WindowMetrics.release`), and the master, which decodes every worker's deltas,
    also collects every tick (~1 ms with the heap frozen) so its RSS stays flat for hours.
    """
    gc.collect()
    gc.freeze()


class RunCollector:
    """The collector of a process running users: frozen heap, no automatic collection while a
    test runs, a full collection every `interval_s` (see the module doc)."""

    def __init__(self, interval_s: float = COLLECT_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._schedule = Background(self._run)

    def start(self) -> None:
        """A test starts: freeze the heap, collect on schedule only."""
        freeze_heap()
        gc.disable()
        self._schedule.ensure()

    def stop(self) -> None:
        """The test is over: automatic collection again."""
        self._schedule.stop()
        gc.enable()

    def _run(self) -> None:
        while True:
            gevent.sleep(self.interval_s)
            gc.collect()
