"""Is the load generator itself the bottleneck? CPU and event-loop lag of every process running users.

A saturated client inflates TTFT and ITL and blames the server for it. Each process running users
has a `LoopMonitor`: one greenlet that sleeps `tick_s` at a time and measures how late it wakes
(the gevent loop's lag: how long any ready greenlet — a stream's reader included — waits for
the CPU), plus the process's CPU share (`time.process_time`). Workers send a sample with each
stats report; the master (or a local runner) feeds every sample to a `SaturationTracker`, which
keeps the peaks per process and warns once per process, in the console and in summary.json
(`warnings`, and `client` for the peaks), when a sample crosses `CPU_WARN_PCT` or `LAG_WARN_MS`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
import numpy as np

from llm_locust.transport.background import Background

logger = logging.getLogger("llm_locust")

CPU_WARN_PCT = 90.0
"""A process using this share of one core (or more) over a report interval is saturated."""
LAG_WARN_MS = 20.0
"""Event-loop lag p99 (ms) over a report interval above which a process is saturated."""


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
        """Since the last call: `cpu_pct` (100 = one core), loop lag `lag_p99_ms` and `lag_max_ms`
        (None without a sample); the samples are then forgotten."""
        cpu_s, wall_s = time.process_time(), time.perf_counter()
        elapsed_s = wall_s - self._wall_s
        cpu_pct = 100 * (cpu_s - self._cpu_s) / elapsed_s if elapsed_s > 0 else 0.0
        self._cpu_s, self._wall_s = cpu_s, wall_s
        lags_s, self._lags_s = self._lags_s, []
        if not lags_s:
            return {"cpu_pct": round(cpu_pct, 1), "lag_p99_ms": None, "lag_max_ms": None}
        lags_ms = np.asarray(lags_s) * 1e3
        return {
            "cpu_pct": round(cpu_pct, 1),
            "lag_p99_ms": round(float(np.percentile(lags_ms, 99)), 3),
            "lag_max_ms": round(float(lags_ms.max()), 3),
        }


class SaturationTracker:
    """Master / local: the peaks of every process's samples, and the saturation warnings."""

    def __init__(self) -> None:
        self.peaks: dict[str, dict[str, float]] = {}
        self.warnings: list[str] = []
        self._warned: set[str] = set()

    def add(self, process: str, sample: dict[str, Any] | None, t_wall_s: float) -> None:
        """Take one `LoopMonitor.take()` sample of `process`, taken at wall-clock `t_wall_s`."""
        if not sample:
            return
        peaks = self.peaks.setdefault(process, {"cpu_pct_max": 0.0, "lag_p99_ms_max": 0.0, "lag_max_ms": 0.0})
        cpu_pct, lag_p99_ms = sample.get("cpu_pct") or 0.0, sample.get("lag_p99_ms") or 0.0
        peaks["cpu_pct_max"] = max(peaks["cpu_pct_max"], cpu_pct)
        peaks["lag_p99_ms_max"] = max(peaks["lag_p99_ms_max"], lag_p99_ms)
        peaks["lag_max_ms"] = max(peaks["lag_max_ms"], sample.get("lag_max_ms") or 0.0)
        if process in self._warned or (cpu_pct < CPU_WARN_PCT and lag_p99_ms < LAG_WARN_MS):
            return
        self._warned.add(process)
        when = time.strftime("%H:%M:%S", time.gmtime(t_wall_s))
        warning = (
            f"client saturated: {process} at {cpu_pct:.0f} % CPU, event-loop lag p99 {lag_p99_ms:.1f} ms "
            f"(from {when} UTC): TTFT/ITL may include the load generator's own delay; add worker "
            "processes (--processes) or lower the load per worker"
        )
        self.warnings.append(warning)
        logger.warning("%s", warning)

    def as_dict(self) -> dict[str, Any]:
        """For summary.json: per process, peak CPU % and loop lag (p99 per interval, max), ms."""
        return {"processes": self.peaks, "cpu_warn_pct": CPU_WARN_PCT, "lag_warn_ms": LAG_WARN_MS}
