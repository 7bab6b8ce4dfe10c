"""Per-process recording and the worker -> master deltas: finished requests into time windows, steps and breakdowns.

Data flow: each process that runs users has a `MetricsRecorder`; every finished request (`RequestRecord`) lands in the
window (`window.WindowMetrics`) of its completion time (wall clock, `interval_s` wide). A worker ships the windows it
filled since its last report as a delta (`delta_to_wire`); the master (or a local runner, in process) merges deltas
into `RunMetrics`, which keeps the run totals plus the windows not yet written to the time series.

Breakdowns: a request whose record names `groups` — (dimension, label) pairs such as ("replica", "2") or
("prompt_tokens", "512-1023") — also counts in one window per pair and sweep step (`GroupKey`), merged like the steps:
warm-up requests of a step are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from llm_locust.metrics import declarations
from llm_locust.metrics.hdr import (
    decode_histograms,
    distribution,
    new_histogram,
    whole_us,
)
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.slo import Slo, request_meets
from llm_locust.metrics.window import WindowMetrics


class WindowKey(NamedTuple):
    """Where a finished request's metrics go: the time window of its completion (start, epoch
    s), the sweep step it was sent in (-1: none), whether it was sent after the step's warm-up floor, and the window it
    was sent in (its start, epoch s; -1 outside steps: a step's measured window is found by send time,
    `metrics.step_windows`)."""

    start: int
    step: int
    measured: bool
    sent: int = -1


class ProcessLatency:
    """One declared latency (`name`) of the requests one process finished in a test: that process's own
    distribution (a master merges every process's windows into one; this says how each process did — an open loop's
    send error per worker)."""

    def __init__(self, name: str) -> None:
        (metric,) = declarations.pick(name)
        self._read_s = metric.read_s
        self.name = name
        self.sum_us = 0
        self.hist = new_histogram(name)

    def add(self, record: RequestRecord) -> None:
        """Count `record`'s value, if it has one."""
        value_s = self._read_s(record) if self._read_s is not None else None
        if value_s is not None:
            value_us = whole_us(value_s)
            self.hist.record_value(value_us)
            self.sum_us += value_us

    def distribution_ms(self) -> dict[str, float | int | None]:
        """`distribution` of the values so far, in ms."""
        return distribution(self.hist, self.sum_us, scale=1000.0)


class GroupKey(NamedTuple):
    """One breakdown of the run: the requests of `label` along `dimension` sent in sweep step
    `step` (-1: none)."""

    dimension: str
    label: str
    step: int


@dataclass
class Delta:
    """What one process measured since its last report: its time windows and its breakdowns
    (the same requests again, by group)."""

    windows: dict[WindowKey, WindowMetrics] = field(default_factory=dict)
    groups: dict[GroupKey, WindowMetrics] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.windows)

    @property
    def requests(self) -> int:
        """Requests in the delta, successful, failed or cancelled (each once)."""
        return sum(w.requests_finished for w in self.windows.values())

    def release(self) -> None:
        """Free every window's histograms (the delta was sent)."""
        for window in (*self.windows.values(), *self.groups.values()):
            window.release()


def window_start(t_wall_s: float, interval_s: float) -> int:
    """Start (epoch seconds, whole) of the window of `interval_s` seconds holding wall-clock time `t_wall_s`."""
    return int(math.floor(t_wall_s / interval_s) * interval_s)


class MetricsRecorder:
    """Per-process collector: finished requests into windows keyed by `WindowKey`.

    `slos` decide which successful requests are good (goodput): every objective met by the
    request's own value of its latency (`LatencyMetric.request_ms`: for the ITL, its largest gap).
    """

    def __init__(self, interval_s: float, slos: tuple[Slo, ...] = ()) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval_s}")
        self.interval_s = interval_s
        self.slos = slos
        named = {slo.metric for slo in slos}
        self._judged = tuple(m for m in declarations.latencies(slo=True) if m.name in named)  # what goodput reads
        self._pending = Delta()

    def window_start(self, t_wall_s: float) -> int:
        """Start (epoch seconds, whole) of the window holding wall-clock time `t_wall_s`."""
        return window_start(t_wall_s, self.interval_s)

    def record(self, record: RequestRecord, t_wall_s: float, t_sent_wall_s: float | None = None) -> None:
        """Add a finished request, completed at wall-clock `t_wall_s` (time.time()) and sent at `t_sent_wall_s`
        (None: at `t_wall_s`)."""
        good = self._good(record)
        start = self.window_start(t_wall_s)
        sent = -1 if record.step < 0 else self.window_start(t_wall_s if t_sent_wall_s is None else t_sent_wall_s)
        _window(self._pending.windows, WindowKey(start, record.step, record.measured, sent)).add(record, good)
        if record.groups and (record.step < 0 or record.measured):
            for dimension, label in record.groups:
                _window(self._pending.groups, GroupKey(dimension, label, record.step)).add(record, good)

    def paused(self, seconds: float, t_wall_s: float, step: int = -1, measured: bool = True) -> None:
        """Count one pause of a user backing off (`load.backoff`) that lasted `seconds` and ended at wall-clock
        `t_wall_s` (time.time()), after a request of sweep step `step` (`measured`: sent after its warm-up)."""
        start = self.window_start(t_wall_s)
        window = _window(self._pending.windows, WindowKey(start, step, measured, start if step >= 0 else -1))
        window.backoff_pauses += 1
        window.backoff_s += seconds

    def _good(self, record: RequestRecord) -> bool:
        """True when `record` succeeded and met every SLO, each judged by the request's own value of the latency
        (`LatencyMetric.request_ms`)."""
        if not self.slos or not record.ok:
            return record.ok
        return request_meets(self.slos, {m.name: m.request_ms(record) for m in self._judged})

    def take_delta(self) -> Delta:
        """The windows filled since the last call (and forget them)."""
        delta, self._pending = self._pending, Delta()
        return delta


def _window(windows: dict[Any, WindowMetrics], key: Any) -> WindowMetrics:
    """`windows[key]`, created empty when missing."""
    window = windows.get(key)
    if window is None:
        window = windows[key] = WindowMetrics()
    return window


def delta_to_wire(delta: Delta) -> dict[str, Any]:
    """A recorder delta as a msgpack-able dict with string keys: windows as "start:step:measured:sent",
    groups as "step:dimension:label" (a label may hold ":", a dimension may not)."""
    return {
        "windows": {f"{k.start}:{k.step}:{int(k.measured)}:{k.sent}": w.to_wire() for k, w in delta.windows.items()},
        "groups": {f"{k.step}:{k.dimension}:{k.label}": w.to_wire() for k, w in delta.groups.items()},
    }


def delta_from_wire(data: dict[str, Any]) -> Delta:
    """Reverse of `delta_to_wire`; every histogram of the delta decoded at once, sparse (`decode_histograms`): a
    delta is merged into a run's windows, never added to."""
    windows = [
        (WindowKey(int(start), int(step), measured == "1", int(sent)), window)
        for start, step, measured, sent, window in ((*key.split(":"), w) for key, w in data["windows"].items())
    ]
    groups = [
        (GroupKey(dimension, label, int(step)), window)
        for step, dimension, label, window in ((*key.split(":", 2), w) for key, w in data["groups"].items())
    ]
    decoded = iter(decode_histograms([item for _, w in windows + groups for item in w["hist"].items()]))
    delta = Delta()
    for key, window in windows:
        delta.windows[key] = WindowMetrics.from_wire(window, [next(decoded) for _ in window["hist"]])
    for group, window in groups:
        delta.groups[group] = WindowMetrics.from_wire(window, [next(decoded) for _ in window["hist"]])
    return delta


def merge_into(windows: dict[Any, WindowMetrics], key: Any, window: WindowMetrics) -> None:
    """Add `window` to `windows[key]` (a copy of it when the key is new: `window` is shared)."""
    _window(windows, key).merge(window)
