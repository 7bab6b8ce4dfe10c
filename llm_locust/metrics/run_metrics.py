"""The merged metrics of a run (`RunMetrics`): what a master (or a local runner) makes of every process's deltas."""

from __future__ import annotations

from collections import Counter

from llm_locust.metrics.recorder import Delta, GroupKey, merge_into
from llm_locust.metrics.step_windows import StepWindows
from llm_locust.metrics.window import WindowMetrics


class RunMetrics:
    """The merged metrics of a run: totals, per sweep step (its measured window: `metrics.step_windows`), per
    breakdown group, and the time windows until the time series takes them."""

    def __init__(self) -> None:
        self.total = WindowMetrics()
        self.step_windows = StepWindows()
        self.groups: dict[GroupKey, WindowMetrics] = {}
        self._windows: dict[int, WindowMetrics] = {}
        self.deltas_merged = 0

    @property
    def steps(self) -> dict[int, WindowMetrics]:
        """Per step, the metrics of its measured window (`StepWindows.measured`: so far, for one not settled)."""
        return self.step_windows.measured_steps()

    @property
    def warmup_requests(self) -> Counter[int]:
        """Per step, the requests sent before its measured window."""
        return self.step_windows.warmup_requests

    def merge_delta(self, delta: Delta) -> None:
        """Merge one process's delta into the totals, its step, its time window and its groups."""
        for key, window in delta.groups.items():
            merge_into(self.groups, key, window)
            window.release()
        for key, window in delta.windows.items():
            self.total.merge(window)
            if key.step >= 0:
                self.step_windows.add(key.step, key.start, key.sent, key.measured, window)
            merge_into(self._windows, key.start, window)
            window.release()  # copied into every total it counts for
        self.deltas_merged += 1

    def open_windows(self) -> list[tuple[int, WindowMetrics]]:
        """The windows not popped yet (reports may still add to them), oldest first; not copies."""
        return sorted(self._windows.items())

    def pop_windows(self, before_s: float) -> list[tuple[int, WindowMetrics]]:
        """Remove and return, oldest first, the windows that started before `before_s`."""
        ready = sorted(start for start in self._windows if start < before_s)
        return [(start, self._windows.pop(start)) for start in ready]
