"""Run health on the master (or local runner): each process's CPU and memory over time, client
saturation and drift windows — what a soak or scheduled run needs besides the LLM metrics.

CPU % and RSS come from Locust's own monitor: every Locust process measures itself (psutil, every
10 s) and workers send theirs to the master with each heartbeat. `RunMonitor.tick` samples them
every `interval_s` into workers_timeseries.csv (one flushed row per process, nothing kept in
memory but per-process running statistics). Whether a process was saturated is not decided here
(one CPU sample above 90 % is no saturation) but by `runtime.saturation`. Does not import Locust:
the runner is read through its public attributes.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_locust.config.settings import Settings
from llm_locust.metrics.drift import DriftTracker
from llm_locust.metrics.vocabulary import PROCESSES_FILE
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.summary import ProcessHealth

PROCESSES_COLUMNS = ("time", "epoch_s", "elapsed_s", "process", "cpu_percent", "rss_mb")
_MB = 1024 * 1024


@dataclass
class ProcessStats:
    """Running CPU/RSS statistics of one process (constant size, whatever the run length)."""

    samples: int = 0
    cpu_percent_sum: float = 0.0
    cpu_percent_max: float = 0.0
    rss_mb_first: float = 0.0
    rss_mb_after_warmup: float | None = None
    rss_mb_max: float = 0.0
    rss_mb_last: float = 0.0

    def add(self, cpu_percent: float, rss_mb: float, after_warmup: bool) -> None:
        """Count one sample (CPU in % of one core, RSS in MiB)."""
        if self.samples == 0:
            self.rss_mb_first = rss_mb
        if after_warmup and self.rss_mb_after_warmup is None:
            self.rss_mb_after_warmup = rss_mb
        self.samples += 1
        self.cpu_percent_sum += cpu_percent
        self.cpu_percent_max = max(self.cpu_percent_max, cpu_percent)
        self.rss_mb_max = max(self.rss_mb_max, rss_mb)
        self.rss_mb_last = rss_mb

    def as_dict(self) -> dict[str, Any]:
        """The statistics as written to summary.json.

        No growth figure: RSS saws by several MB as the garbage collector frees histograms, so
        one sample against another says more about the phase than about growth; the samples over
        time are in workers_timeseries.csv (benchmarks/soak_memory.py compares window means).
        """
        base = self.rss_mb_after_warmup
        return {
            "samples": self.samples,
            "cpu_percent_mean": round(self.cpu_percent_sum / self.samples, 1) if self.samples else None,
            "cpu_percent_max": round(self.cpu_percent_max, 1),
            "rss_mb_first": round(self.rss_mb_first, 1),
            "rss_mb_after_warmup": None if base is None else round(base, 1),
            "rss_mb_max": round(self.rss_mb_max, 1),
            "rss_mb_last": round(self.rss_mb_last, 1),
        }


def process_samples(runner: Any, is_master: bool) -> list[tuple[str, float, int]]:
    """(process, CPU %, RSS bytes) of this process and, on a master, of every worker still reporting;
    a process Locust has not measured yet (its first measurement comes 10 s after it starts) is left out."""
    samples = []
    if runner.current_memory_usage:
        samples.append(("master" if is_master else "local", runner.current_cpu_usage, runner.current_memory_usage))
    if is_master:
        for worker in list(runner.clients.values()):
            if worker.state != "missing" and worker.memory_usage:
                samples.append((str(worker.id), worker.cpu_usage, worker.memory_usage))
    return samples


class RunMonitor:
    """Master/local: process resources, saturation and drift while the run goes; the verdict at the end."""

    def __init__(self, results_dir: Path, settings: Settings, t_start_s: float, is_master: bool) -> None:
        self.settings = settings
        self.is_master = is_master
        self.t_start_s = t_start_s
        self.drift = DriftTracker(t_start_s, settings.objectives.drift_window_s, settings.objectives.drift_warmup_s)
        self.processes: dict[str, ProcessStats] = {}
        self._next_sample_s = t_start_s
        results_dir.mkdir(parents=True, exist_ok=True)
        self.path = results_dir / PROCESSES_FILE
        self._file = self.path.open("w", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(PROCESSES_COLUMNS)
        self._file.flush()

    def tick(self, runner: Any, now_s: float) -> None:
        """Sample CPU/RSS of every process (every `interval_s`)."""
        if now_s < self._next_sample_s or self._file.closed:
            return
        self._next_sample_s = now_s + self.settings.output.interval_s
        after_warmup = now_s - self.t_start_s >= self.settings.objectives.drift_warmup_s
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now_s))
        for process, cpu_percent, rss_bytes in process_samples(runner, self.is_master):
            rss_mb = rss_bytes / _MB
            self.processes.setdefault(process, ProcessStats()).add(cpu_percent, rss_mb, after_warmup)
            row = (
                stamp,
                round(now_s, 3),
                round(now_s - self.t_start_s, 3),
                process,
                round(cpu_percent, 1),
                round(rss_mb, 2),
            )
            self._csv.writerow(row)
        self._file.flush()

    def add_window(self, start_s: float, window: WindowMetrics) -> None:
        """Take one closed LLM time-series window (for drift)."""
        self.drift.add(start_s, window)

    def health(self, t_end_s: float, cpu_saturated: tuple[str, ...]) -> ProcessHealth:
        """Each process's CPU/RSS statistics, the processes found saturated (`runtime.saturation`) and the drift
        windows, for the final summary.json."""
        return ProcessHealth(
            processes={name: stats.as_dict() for name, stats in self.processes.items()},
            processes_file=self.path.name,
            cpu_saturated=cpu_saturated,
            drift=self.drift.result(t_end_s),
        )

    def close(self) -> None:
        """Close workers_timeseries.csv (idempotent)."""
        self._file.close()
