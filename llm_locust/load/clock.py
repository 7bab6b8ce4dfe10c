"""The run's clock: every time that crosses processes is read on the master's wall clock.

Workers on different machines each read their own wall clock; the global arrival sequence (its origin is the
master's epoch second), requests.jsonl and the time series assume one clock. A worker measures how far its clock is
from its master's by round trips over Locust's message channel (`runtime.clock_sync`): it reads its own wall clock
as it sends a ping (`t_send_s`) and as the answer arrives (`t_recv_s`); the master answers with its wall clock read
in between (`t_master_s`). So the worker's clock is ahead of the master's by

    offset_s = (t_send_s + t_recv_s) / 2 - t_master_s,   give or take uncertainty_s = (t_recv_s - t_send_s) / 2

— a bound, not a statistic: however the round trip splits between the two legs, the master's reading lies inside
it. A round trip slowed by a busy loop on either side only widens the bound, so of the recent samples the one with
the shortest round trip is kept (`OffsetEstimator`). `RunClock` is one process's reading of the master's clock: its
own wall clock minus the offset (0 on the master and a local runner, which have no other clock to follow).

Pure: no Locust, no gevent (the wiring is `runtime.clock_sync`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any

KEEP_SAMPLES = 32
"""Round trips a worker keeps; the best of them is its offset (a few pings every report interval: the last ~30 s)."""
PRECISION_S = 0.001
"""The precision the results claim for times that cross processes: send times within 1 ms of their due time (so an
offset known only to ±1 ms or worse is a warning)."""


@dataclass(frozen=True, slots=True)
class Offset:
    """How far a worker's wall clock is ahead of its master's (`offset_s`, negative: behind) and how well that is
    known: the true offset lies within ± `uncertainty_s` (half the round trip it was measured with), seconds."""

    offset_s: float
    uncertainty_s: float

    def to_wire(self) -> dict[str, float]:
        """The offset as a worker reports it to its master."""
        return {"offset_s": self.offset_s, "uncertainty_s": self.uncertainty_s}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Offset:
        """The offset a worker reported (`to_wire`)."""
        return cls(float(data["offset_s"]), float(data["uncertainty_s"]))


class OffsetEstimator:
    """A worker's offset from its round trips to the master: of the last `keep`, the one with the shortest round
    trip (see the module docstring)."""

    __slots__ = ("_samples",)

    def __init__(self, keep: int = KEEP_SAMPLES) -> None:
        self._samples: deque[Offset] = deque(maxlen=keep)

    def add(self, t_send_s: float, t_recv_s: float, t_master_s: float) -> Offset | None:
        """Take one round trip: the worker's wall clock as it sent the ping and as the answer arrived, the master's
        as it answered (epoch seconds). Returns the best offset now (None: none yet). A round trip whose answer
        came before its ping (the worker's clock stepped back meanwhile) says nothing and is left out."""
        if t_recv_s >= t_send_s:
            self._samples.append(Offset((t_send_s + t_recv_s) / 2 - t_master_s, (t_recv_s - t_send_s) / 2))
        return self.best

    @property
    def best(self) -> Offset | None:
        """The kept sample with the shortest round trip (None before any)."""
        return min(self._samples, key=lambda s: s.uncertainty_s, default=None)


class RunClock:
    """One process's clock of the run: the master's wall clock, in epoch seconds. `offset` is this process's wall
    clock ahead of the master's: None on the master and a local runner (it is the master's clock), and on a worker
    until its first round trip (`OffsetEstimator`) — read as 0 meanwhile."""

    __slots__ = ("offset",)

    def __init__(self) -> None:
        self.offset: Offset | None = None

    @property
    def offset_s(self) -> float:
        """This process's wall clock minus the master's, seconds (0 while not measured)."""
        return 0.0 if self.offset is None else self.offset.offset_s

    def now_s(self) -> float:
        """The master's wall clock now, epoch seconds (`time.time()` corrected by the offset)."""
        return time.time() - self.offset_s

    def perf_at(self, epoch_s: float) -> float:
        """The `perf_counter` seconds of this process at which the master's clock reads `epoch_s`."""
        return epoch_s - self.now_s() + perf_counter()


def offsets_summary(by_worker: Mapping[str, Offset | None]) -> dict[str, Any] | None:
    """summary.json's `clocks`: per worker its last reported offset and uncertainty in ms (null: never measured) and
    the precision the results claim; None without workers (a local run has one clock)."""
    if not by_worker:
        return None
    return {
        "by_worker": {
            worker: None
            if offset is None
            else {"offset_ms": round(offset.offset_s * 1e3, 3), "uncertainty_ms": round(offset.uncertainty_s * 1e3, 3)}
            for worker, offset in sorted(by_worker.items())
        },
        "precision_ms": PRECISION_S * 1e3,
    }


NAMED_AT_MOST = 5
"""Workers a warning names; beyond, it counts the others."""


def offset_warnings(by_worker: Mapping[str, Offset | None], precision_s: float = PRECISION_S) -> tuple[str, ...]:
    """The warnings of workers whose clock offset is not known to `precision_s`, or was never measured (each names
    at most `NAMED_AT_MOST` of them, the loosest first)."""
    never = sorted(worker for worker, offset in by_worker.items() if offset is None)
    loose = sorted(
        ((worker, offset.uncertainty_s) for worker, offset in by_worker.items()
         if offset is not None and offset.uncertainty_s > precision_s),
        key=lambda item: (-item[1], item[0]),
    )  # fmt: skip
    warnings = []
    if never:
        warnings.append(
            f"the clock offset of {len(never)} worker(s) was never measured: {_named(never)}; their send times, "
            "request lines and time-series windows are on their own clocks"
        )
    if loose:
        each = _named([f"{worker} ±{uncertainty_s * 1e3:.1f} ms" for worker, uncertainty_s in loose])
        warnings.append(
            f"the clock offset of {len(loose)} worker(s) is known only to {each} (half the shortest round trip to "
            f"the master), more than the {precision_s * 1e3:g} ms the results claim: their send times, request "
            "lines and time-series windows may be off by that much"
        )
    return tuple(warnings)


def _named(items: list[str]) -> str:
    """The first `NAMED_AT_MOST` of `items`, comma-separated, and how many more."""
    shown = ", ".join(items[:NAMED_AT_MOST])
    return shown if len(items) <= NAMED_AT_MOST else f"{shown} and {len(items) - NAMED_AT_MOST} more"
