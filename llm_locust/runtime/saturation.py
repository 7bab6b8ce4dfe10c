"""Is the load generator itself the bottleneck? CPU and event-loop lag of every process running users.

A saturated client inflates TTFT and ITL and blames the server for it. Each process running users
has a `LoopMonitor`: one greenlet that sleeps `tick_s` at a time and measures how late it wakes
(the gevent loop's lag: how long any ready greenlet — a stream's reader included — waits for
the CPU), plus the process's CPU share (`time.process_time`). Workers send a sample with each
stats report; the master (or a local runner) feeds every sample to a `SaturationTracker`.

The decision is `assess`, a pure function of a process's recent samples:
- **saturated** (a warning, once per process, in the console and summary.json `warnings`; the verdict fails): the
  process was short of CPU — at least `CPU_WARN_PCT` of one core over consecutive intervals covering
  `SUSTAINED_S`, with the loop lag that follows (p99 at least `LAG_WARN_MS` in one of them);
- **stall** (a milder note, `client.stalls` in summary.json and an info line): one interval's loop lag p99 of
  `LAG_WARN_MS` or more at lower CPU — the loop was held by a blocking call in the process or the machine was busy
  with other processes; adding processes would not help;
- nothing otherwise. The run's start-up and shutdown are not judged (`judged`): an interval starting within
  `STARTUP_S` of the test's start, or ending after it stopped.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import gevent
import numpy as np
import numpy.ma  # (np.percentile imports it on its first call: 20-30 ms of a worker's loop at its first report)

from llm_locust.metrics.client_error import ClientTiming
from llm_locust.transport.background import Background

logger = logging.getLogger("llm_locust")

CPU_WARN_PCT = 90.0
"""A process using this share of one core (or more), sustained, is short of CPU."""
LAG_WARN_MS = 20.0
"""Event-loop lag p99 (ms) over a report interval that makes the loop's delay matter to the timings."""
SUSTAINED_S = 5.0
"""Seconds of consecutive intervals at `CPU_WARN_PCT` or more before a process counts as saturated."""
STARTUP_S = 2.0
"""An interval starting less than this many seconds after the test started is not judged (start-up)."""
STALLS_KEPT = 10
"""Stall notes kept (and logged) per run; later ones are only counted."""


@dataclass(frozen=True, slots=True)
class LoopSample:
    """One process's `LoopMonitor.take()` over one interval, as received: the interval ended at wall-clock
    `t_end_s` (epoch seconds) and lasted `interval_s`; `cpu_pct` is 100 for one core."""

    t_end_s: float
    interval_s: float
    cpu_pct: float
    lag_p99_ms: float
    lag_max_ms: float

    @classmethod
    def of(cls, sample: dict[str, Any], t_end_s: float) -> LoopSample:
        """From the wire dict of `LoopMonitor.take` received at `t_end_s` (missing values read as 0)."""
        return cls(
            t_end_s=t_end_s,
            interval_s=sample.get("interval_s") or 0.0,
            cpu_pct=sample.get("cpu_pct") or 0.0,
            lag_p99_ms=sample.get("lag_p99_ms") or 0.0,
            lag_max_ms=sample.get("lag_max_ms") or 0.0,
        )


class Finding(StrEnum):
    """What `assess` makes of a process's latest sample."""

    SATURATED = "saturated"  # short of CPU: sustained CPU near one core, with loop lag
    STALL = "stall"  # the loop was held at lower CPU: a blocking call, or a busy machine


def judged(sample: LoopSample, t_start_s: float, t_stop_s: float | None) -> bool:
    """Whether `sample` is judged at all: not when its interval began within `STARTUP_S` of the test's start
    (`t_start_s`), nor when it ended after the test stopped (`t_stop_s`, None while it runs); epoch seconds."""
    if sample.t_end_s - sample.interval_s < t_start_s + STARTUP_S:
        return False
    return t_stop_s is None or sample.t_end_s <= t_stop_s


def assess(samples: Sequence[LoopSample]) -> Finding | None:
    """The finding of the latest of `samples` (one process's judged samples, oldest first, consecutive).

    SATURATED when the trailing run of samples at `CPU_WARN_PCT` or more covers `SUSTAINED_S` and one of them has
    a loop-lag p99 of `LAG_WARN_MS` or more; STALL when the latest is below `CPU_WARN_PCT` with a lag p99 of
    `LAG_WARN_MS` or more; else None.
    """
    if not samples:
        return None
    latest = samples[-1]
    if latest.cpu_pct < CPU_WARN_PCT:
        return Finding.STALL if latest.lag_p99_ms >= LAG_WARN_MS else None
    busy_s, lagged = 0.0, False
    for sample in reversed(samples):
        if sample.cpu_pct < CPU_WARN_PCT:
            break
        busy_s += sample.interval_s
        lagged = lagged or sample.lag_p99_ms >= LAG_WARN_MS
    return Finding.SATURATED if busy_s >= SUSTAINED_S and lagged else None


class LoopMonitor:
    """CPU share and gevent loop lag of this process since the last `take`."""

    def __init__(self, tick_s: float = 0.05) -> None:
        self.tick_s = tick_s
        self._lags_s: list[float] = []
        self._ticker = Background(self._run)
        self._cpu_s = time.process_time()
        self._wall_s = time.perf_counter()

    def start(self) -> None:
        """Start measuring (again): the next `take` covers from now on."""
        self.take()
        self._ticker.ensure()

    def stop(self) -> None:
        """Stop the measuring greenlet."""
        self._ticker.stop()

    def _run(self) -> None:
        perf_counter, sleep, tick_s = time.perf_counter, gevent.sleep, self.tick_s
        while True:
            t = perf_counter()
            sleep(tick_s)
            self._lags_s.append(perf_counter() - t - tick_s)

    @property
    def elapsed_s(self) -> float:
        """Seconds since the last `take`."""
        return time.perf_counter() - self._wall_s

    def take(self) -> dict[str, float | None]:
        """Since the last call (`interval_s` seconds): `cpu_pct` (100 = one core), loop lag `lag_p99_ms` and
        `lag_max_ms` (None without a sample); the samples are then forgotten."""
        cpu_s, wall_s = time.process_time(), time.perf_counter()
        elapsed_s = wall_s - self._wall_s
        cpu_pct = 100 * (cpu_s - self._cpu_s) / elapsed_s if elapsed_s > 0 else 0.0
        self._cpu_s, self._wall_s = cpu_s, wall_s
        lags_s, self._lags_s = self._lags_s, []
        if not lags_s:
            return {"interval_s": round(elapsed_s, 3), "cpu_pct": round(cpu_pct, 1), "lag_p99_ms": None,
                    "lag_max_ms": None}  # fmt: skip
        lags_ms = np.asarray(lags_s) * 1e3
        return {
            "interval_s": round(elapsed_s, 3),
            "cpu_pct": round(cpu_pct, 1),
            "lag_p99_ms": round(float(np.percentile(lags_ms, 99)), 3),
            "lag_max_ms": round(float(lags_ms.max()), 3),
        }


class SaturationTracker:
    """Master / local: the peaks of every process's samples, its recent judged samples, and what `assess` found."""

    def __init__(self, t_start_s: float | None = None) -> None:
        self.t_start_s = time.time() if t_start_s is None else t_start_s  # epoch s: the test's start
        self.t_stop_s: float | None = None
        self.peaks: dict[str, dict[str, float]] = {}
        self.warnings: list[str] = []
        self.stalls: list[dict[str, Any]] = []  # the first `STALLS_KEPT` stall notes
        self.stalls_total = 0
        self._recent: dict[str, deque[LoopSample]] = {}
        self._saturated: set[str] = set()

    @property
    def saturated(self) -> tuple[str, ...]:
        """The processes found saturated, sorted."""
        return tuple(sorted(self._saturated))

    def stop(self, t_stop_s: float) -> None:
        """The test stopped at `t_stop_s` (epoch s): samples ending later are not judged."""
        if self.t_stop_s is None:
            self.t_stop_s = t_stop_s

    def add(self, process: str, sample: dict[str, Any] | None, t_wall_s: float) -> None:
        """Take one `LoopMonitor.take()` sample of `process`, received at wall-clock `t_wall_s` (epoch s)."""
        if not sample:
            return
        value = LoopSample.of(sample, t_wall_s)
        peaks = self.peaks.setdefault(process, {"cpu_pct_max": 0.0, "lag_p99_ms_max": 0.0, "lag_max_ms": 0.0})
        peaks["cpu_pct_max"] = max(peaks["cpu_pct_max"], value.cpu_pct)
        peaks["lag_p99_ms_max"] = max(peaks["lag_p99_ms_max"], value.lag_p99_ms)
        peaks["lag_max_ms"] = max(peaks["lag_max_ms"], value.lag_max_ms)
        if not judged(value, self.t_start_s, self.t_stop_s):
            return
        recent = self._recent.setdefault(process, deque(maxlen=8))
        recent.append(value)
        finding = assess(recent)
        when = time.strftime("%H:%M:%S", time.gmtime(t_wall_s))
        if finding is Finding.SATURATED and process not in self._saturated:
            self._saturated.add(process)
            warning = (
                f"client saturated: {process} at {value.cpu_pct:.0f} % CPU for {SUSTAINED_S:g} s or more, event-loop "
                f"lag p99 {value.lag_p99_ms:.1f} ms (from {when} UTC): TTFT/ITL include the load generator's own "
                "delay; add worker processes (--processes) or lower the load per worker"
            )
            self.warnings.append(warning)
            logger.warning("%s", warning)
        elif finding is Finding.STALL:
            self.stalls_total += 1
            if len(self.stalls) < STALLS_KEPT:
                self.stalls.append({"process": process, "at": f"{when} UTC", "cpu_pct": value.cpu_pct,
                                    "lag_p99_ms": value.lag_p99_ms, "lag_max_ms": value.lag_max_ms})  # fmt: skip
                logger.info(
                    "note: event-loop stall in %s at %s UTC: up to %.0f ms (p99 %.1f ms) at %.0f %% CPU — a blocking "
                    "call in the process or a busy machine (other processes took the CPU), not a saturated client; "
                    "requests in flight then carry the delay",
                    process, when, value.lag_max_ms, value.lag_p99_ms, value.cpu_pct,
                )  # fmt: skip

    def timing(self, kernel_timestamps: bool) -> ClientTiming:
        """The client's own timing over the run for its error budget (`metrics.client_error`): the busiest process's
        event-loop lag (its highest p99 of an interval, its largest lag; None before any sample) and whether a process
        reached `CPU_WARN_PCT`; `kernel_timestamps`: token times are the kernel's receive times."""
        peaks = self.peaks.values()
        if not peaks:
            return ClientTiming(kernel_timestamps, None, None)
        return ClientTiming(
            kernel_timestamps,
            lag_p99_ms=max(p["lag_p99_ms_max"] for p in peaks),
            lag_max_ms=max(p["lag_max_ms"] for p in peaks),
            busy=max(p["cpu_pct_max"] for p in peaks) >= CPU_WARN_PCT,
        )

    def as_dict(self) -> dict[str, Any]:
        """For summary.json: per process, peak CPU % and loop lag (p99 per interval, max), ms; the stall notes
        (`stalls`, the first `STALLS_KEPT`; `stalls_total`) and the thresholds."""
        return {
            "processes": self.peaks,
            "stalls": self.stalls,
            "stalls_total": self.stalls_total,
            "cpu_warn_pct": CPU_WARN_PCT,
            "lag_warn_ms": LAG_WARN_MS,
            "sustained_s": SUSTAINED_S,
        }
