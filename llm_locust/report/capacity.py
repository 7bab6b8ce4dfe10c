"""Capacity under SLOs: each step checked against every objective, and the highest step meeting all.

"Highest" is the step with the most load (users, or offered rate for open-loop runs); steps are
checked with `llm_locust.metrics.slo.evaluate` on the step's own `metrics` object in summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_locust.metrics.slo import Slo, SloResult, evaluate
from llm_locust.report.run_data import RunData
from llm_locust.report.tables import load_axis, step_sources


@dataclass(frozen=True)
class StepCheck:
    """One step (index None: the whole run) checked against the SLOs."""

    step: int | None
    label: str
    load: float | None
    results: list[SloResult]
    output_tokens_per_s: float
    requests_per_s: float

    @property
    def ok(self) -> bool:
        """True when every objective is met."""
        return all(result.ok for result in self.results)


@dataclass(frozen=True)
class Capacity:
    """The SLO checks of one run and its pick (None when no step meets every SLO)."""

    run: str
    load_title: str
    checks: list[StepCheck]
    best: StepCheck | None


def capacity(run: RunData, slos: tuple[Slo, ...]) -> Capacity | None:
    """Check every step of `run` (or the run itself) against `slos`; None without summary or SLOs."""
    if not slos or run.summary is None:
        return None
    load_key, load_title = load_axis(run)
    checks = [
        StepCheck(
            step=index,
            label=label,
            load=source.get(load_key),
            results=evaluate(slos, source["metrics"]),
            output_tokens_per_s=source["throughput"].get("output_tokens_per_s") or 0.0,
            requests_per_s=source["throughput"].get("requests_per_s") or 0.0,
        )
        for index, label, source in step_sources(run)
    ]
    passing = [check for check in checks if check.ok]
    best = max(passing, key=lambda c: (c.load if c.load is not None else -1, c.output_tokens_per_s), default=None)
    return Capacity(run=run.name, load_title=load_title, checks=checks, best=best)
