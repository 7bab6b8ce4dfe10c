"""A sweep step's (or search trial's) merged metrics, measured from its steady state on: the master's side.

Each step has, as workers' deltas arrive:

- its series: per time window (by completion time) of the step's requests, warm-up or not, how many finished and
  the sum and count of their TTFT (`SeriesCounts`) — what the steady-state, precision and over-saturation tests of
  `load.step_end` read;
- its measured requests (sent after its `--warmup-s` floor), by the window they were *sent* in: held apart
  (`pending`) until the step's steady state is settled (`settle`), then those sent from the steady start on are its
  metrics (`measured`) and the others count as warm-up (`warmup_requests`); later windows go straight where they belong.
  A step settled with no steady start (`settle(step, None)`: never steady) keeps every measured request, from the
  floor on.

Memory stays flat however long a step waits to be settled: the windows sent before the first start its steady test
can still find (`rule_out_before`: every earlier start was tested and failed) leave the pending ones for one merged
whole (`_early`: warm-up should the step be found steady, measured should it never be) — a step holds at most the
steady test's windows and those still open, not one per window of its length (a never-steady 60 s step of 128 users
at 1 s windows held 54 MB more at its end, one window's dense histograms a second).

So a step's metrics are exactly those of the requests sent in its measured window, as before, with the window's
start found instead of assumed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from llm_locust.metrics.recorder import merge_into
from llm_locust.metrics.window import WindowMetrics


@dataclass
class SeriesCounts:
    """One window of a step's series: requests finished, and the TTFT values (µs) of those that have one."""

    requests: int = 0
    ttft_count: int = 0
    ttft_sum_us: int = 0

    @property
    def ttft_ms(self) -> float | None:
        """Mean TTFT in ms (None: none)."""
        return self.ttft_sum_us / self.ttft_count / 1000.0 if self.ttft_count else None


_UNSETTLED = object()


class StepWindows:
    """Every step's series and measured requests (see the module docstring)."""

    def __init__(self) -> None:
        self._settled: dict[int, WindowMetrics] = {}  # settled steps' measured windows
        self.warmup_requests: Counter[int] = Counter()  # per step: requests sent before its measured window
        self.series: dict[int, dict[int, SeriesCounts]] = {}
        self.steady_from: dict[int, float | None] = {}  # settled steps: their steady start (None: never steady)
        self.unjudged: set[int] = set()  # settled steps too short to tell (fewer whole windows than the test needs)
        self._pending: dict[int, dict[int, WindowMetrics]] = {}  # unsettled steps: by sent window, from _open_from on
        self._open_from: dict[int, float] = {}  # unsettled steps: the first sent window a steady start may still keep
        self._early: dict[int, WindowMetrics] = {}  # unsettled steps: the measured requests sent before _open_from

    def add(self, step: int, start: int, sent: int, measured: bool, window: WindowMetrics) -> None:
        """Count `window` (requests of `step` finished in the window starting at `start`, sent in the one starting at
        `sent`; `measured`: after the floor) in the series and, measured, in the step's metrics or pending ones."""
        counts = self.series.setdefault(step, {}).setdefault(start, SeriesCounts())
        counts.requests += window.requests_finished
        ttft = window.hist.get("ttft")
        if ttft is not None and ttft.get_total_count():
            counts.ttft_count += ttft.get_total_count()
            counts.ttft_sum_us += window.sums["ttft"]
        if not measured:
            self.warmup_requests[step] += window.requests_finished
            return
        steady = self.steady_from.get(step, _UNSETTLED)
        if steady is not _UNSETTLED:
            self._place(step, sent, steady, window)  # type: ignore[arg-type]
            return
        if sent >= self._open_from.get(step, -1.0):
            merge_into(self._pending.setdefault(step, {}), sent, window)
        else:  # a late report of a window already ruled out
            merge_into(self._early, step, window)

    def rule_out_before(self, step: int, start_s: float) -> None:
        """No steady start of the unsettled `step` can come before `start_s` (a window start, epoch s): the requests
        sent before it leave the pending windows for the step's early whole (kept should it never be steady)."""
        if step in self.steady_from or start_s <= self._open_from.get(step, -1.0):
            return
        self._open_from[step] = start_s
        pending = self._pending.get(step, {})
        for sent in sorted(sent for sent in pending if sent < start_s):
            window = pending.pop(sent)
            merge_into(self._early, step, window)
            window.release()

    def _place(self, step: int, sent: int, steady_s: float | None, window: WindowMetrics) -> None:
        if steady_s is None or sent >= steady_s:
            merge_into(self._settled, step, window)
        else:
            self.warmup_requests[step] += window.requests_finished

    def settle(self, step: int, steady_s: float | None, judged: bool = True) -> None:
        """`step` is measured from `steady_s` (a window start, epoch s) on; None: it never was steady, or (`judged`
        False) it was too short to tell (measured from its floor either way). Once per step; its pending requests go
        where they belong. (A start before `rule_out_before`'s, found through a late report of a window already
        judged, keeps the requests from that bound on.)"""
        if step in self.steady_from:
            return
        self.steady_from[step] = steady_s
        if steady_s is None and not judged:
            self.unjudged.add(step)
        early, pending = self._early.pop(step, None), self._pending.pop(step, {})
        self._open_from.pop(step, None)
        if early is not None:
            if steady_s is None:  # never steady: every measured request, those ruled out first
                self._settled[step] = early
            else:  # sent before any start still open: before this one
                self.warmup_requests[step] += early.requests_finished
                early.release()
        for sent, window in sorted(pending.items()):
            self._place(step, sent, steady_s, window)
            window.release()

    def settled(self, step: int) -> bool:
        """The step's steady state is settled (found, or known never to be)."""
        return step in self.steady_from

    def measured(self, step: int) -> WindowMetrics | None:
        """The step's metrics: settled, its measured window's; not yet, every measured request so far (a copy)."""
        if step in self.steady_from:
            return self._settled.get(step)
        parts = [*filter(None, [self._early.get(step)]), *self._pending.get(step, {}).values()]
        if not parts:
            return None
        merged = WindowMetrics()
        for window in parts:
            merged.merge(window)
        return merged

    def measured_steps(self) -> dict[int, WindowMetrics]:
        """`measured` of every step with a measured request (copies for those not settled)."""
        steps = {step: self.measured(step) for step in sorted({*self._settled, *self._early, *self._pending})}
        return {step: window for step, window in steps.items() if window is not None}

    def to_summary(self, step: int, start_s: float) -> dict[str, Any]:
        """summary.json's `steady_state` of a step that started at `start_s`: reached or not (None: the step was too
        short to tell), and when (seconds into the step); `settled` false while the test is still out."""
        if step not in self.steady_from:
            return {"settled": False, "reached": None, "after_s": None}
        steady_s = self.steady_from[step]
        return {
            "settled": True,
            "reached": True if steady_s is not None else None if step in self.unjudged else False,
            "after_s": None if steady_s is None else round(max(0.0, steady_s - start_s), 3),
        }
