"""What `compare` finds, and how it reads: the compared metrics (`METRICS`, declared from the latency declarations),
one metric's result in one scope (`MetricResult`), the whole comparison (`Comparison`, as compare.json), the verdict
names, and the console's table and gate line. The comparison itself is `compare.compare`.

Pure: imports no Locust.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.metrics.declarations import latencies
from llm_locust.metrics.vocabulary import SERIES_PERCENTILES, latency_key
from llm_locust.report.run_data import RunData

REGRESSION, IMPROVEMENT, NO_CHANGE, NO_DATA = "regression", "improvement", "no significant change", "no data"


@dataclass(frozen=True)
class MetricSpec:
    """A compared metric: its `--max-regression` name, its llm_timeseries.csv column, which way is worse, and
    whether windows weigh by their successful requests (latencies) or count alike (rates)."""

    name: str
    column: str
    label: str
    higher_is_worse: bool
    weighted: bool
    unit: str = " %"
    """How its change reads: " %" (relative: candidate / baseline - 1), " pt" (a proportion's, in points)."""


ACCURACY = MetricSpec("accuracy", "accuracy", "accuracy", False, False, unit=" pt")
"""Accuracy of the scored answers, from summary.json (not the time series): the two-proportion z-test judges it."""
METRICS: tuple[MetricSpec, ...] = (
    *(
        MetricSpec(f"{m.name}_{p}_ms", latency_key(m.name, p), f"{m.label} {p} ms", True, True)
        for m in latencies(slo=True, series=True)  # a request's latencies; the connection's phases are diagnostics
        for p in SERIES_PERCENTILES
    ),
    MetricSpec("output_tokens_per_s", "output_tokens_per_s", "output tok/s", False, False),
    MetricSpec("requests_per_s", "requests_per_s", "requests/s", False, False),
)
METRIC_NAMES = (*(m.name for m in METRICS), ACCURACY.name)


@dataclass(frozen=True)
class MetricResult:
    """One metric in one scope ("run", or a sweep step's label): the sides' values (the metric's unit), the
    change and its interval (fractions: 0.1 = +10 %; None without data), the verdict, and the gate."""

    metric: MetricSpec
    scope: str
    baseline: float | None
    candidate: float | None
    change: float | None
    low: float | None
    high: float | None
    verdict: str
    limit: float | None
    """The gate's limit on the worse side (a fraction), None when the metric is not gated."""
    gate_failed: bool
    p_value: float | None = None
    """Accuracy: the two-proportion z-test's two-sided p value (None for the bootstrapped metrics)."""

    @property
    def difference(self) -> float | None:
        """candidate - baseline, in the metric's unit (None without data)."""
        return None if self.candidate is None or self.baseline is None else self.candidate - self.baseline

    def as_dict(self) -> dict[str, Any]:
        """The result as written to compare.json (changes in %)."""

        def pct(value: float | None) -> float | None:
            return None if value is None else round(100 * value, 3)

        return {
            "metric": self.metric.name,
            "scope": self.scope,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "difference": self.difference,
            "change_pct": pct(self.change),
            "interval_pct": [pct(self.low), pct(self.high)],
            "verdict": self.verdict,
            "limit_pct": pct(self.limit),
            "gate_failed": self.gate_failed,
            "p_value": None if self.p_value is None else round(self.p_value, 6),
        }


@dataclass
class Comparison:
    """What `compare` found; `results` in the order of `METRICS`, scope by scope."""

    baseline: list[RunData]
    candidate: list[RunData]
    windows: dict[str, list[int]]
    """Per side ("baseline", "candidate"): the whole windows used of each run."""
    results: list[MetricResult]
    confidence: float
    min_change: float
    resamples: int
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[MetricResult]:
        """The metrics that failed the gate (exit code 3 when any)."""
        return [r for r in self.results if r.gate_failed]

    def as_dict(self) -> dict[str, Any]:
        """The comparison as written to compare.json."""
        return {
            "baseline": [str(run.path) for run in self.baseline],
            "candidate": [str(run.path) for run in self.candidate],
            "windows": self.windows,
            "confidence": self.confidence,
            "min_change_pct": round(100 * self.min_change, 3),
            "resamples": self.resamples,
            "seed": self.seed,
            "passed": not self.failed,
            "results": [r.as_dict() for r in self.results],
            "notes": self.notes,
        }


def console_table(comparison: Comparison) -> str:
    """A fixed-width table of every metric: sides' values, change, interval, verdict; and the gate's line."""
    level = f"{100 * comparison.confidence:g} % interval"
    lines = [f"{'metric':<24}{'baseline':>11}{'candidate':>11}{'change':>10}  {level:<22}verdict"]
    for r in comparison.results:
        name = r.metric.name if r.scope == "run" else f"{r.scope}: {r.metric.name}"
        interval = "-" if r.low is None or r.high is None else f"[{_pct(r.low, r)}, {_pct(r.high, r)}]"
        change = "-" if r.change is None else _pct(r.change, r)
        mark = "  GATE" if r.gate_failed else ""
        lines.append(
            f"{name:<24}{_num(r.baseline):>11}{_num(r.candidate):>11}{change:>10}  {interval:<22}{r.verdict}{mark}"
        )
    lines.append(gate_line(comparison))
    return "\n".join(lines)


def gate_line(comparison: Comparison, command: str = "Compare") -> str:
    """One line starting with `command`: PASSED, or FAILED naming each metric beyond its limit."""
    failed = comparison.failed
    if not failed:
        return f"{command}: PASSED (no regression beyond its limit)"
    parts = [
        f"{r.metric.name}{'' if r.scope == 'run' else f' ({r.scope})'} {_pct(r.change, r)} "
        f"[{_pct(r.low, r)}, {_pct(r.high, r)}] beyond {100 * r.limit:g}{r.metric.unit}"
        for r in failed
        if r.change is not None and r.low is not None and r.high is not None and r.limit is not None
    ]
    return f"{command}: FAILED: " + "; ".join(parts)


def _pct(value: float, result: MetricResult) -> str:
    """A change (a fraction) as the console shows it: "+12.3 %", an accuracy's "-10.0 pt"."""
    return f"{100 * value:+.1f}{result.metric.unit}"


def _num(value: float | None) -> str:
    """A value for the console table: 4 significant digits, '-' without data."""
    return "-" if value is None else f"{value:.4g}"
