"""Service-level objectives: `--slo METRIC_STAT_UNIT=VALUE` parsed, and checked two ways.

    ttft_p90_ms=2000    p90 of time to first token at most 2000 ms
    tpot_p99_ms=50      p99 of time per output token at most 50 ms
    e2e_mean_ms=8000    mean end-to-end latency at most 8000 ms

Metrics: the latencies declared with `slo=True` (`declarations.LATENCIES`: ttft, ttfo, tpot, itl, e2e; defined in
docs/metrics.md "Definitions"). Statistics: p50 p90 p95 p99 p99_9 mean max.

- On a distribution (`evaluate`): the statistic of a run or a step (a summary.json `metrics`
  object) against the threshold — is the run inside its latency budget?
- On one request (`request_meets`): the request's own value against the threshold, whatever the
  statistic — what goodput counts (requests/s meeting every SLO) and SLO attainment
  (good / (successful + failed)). ITL is a pooled distribution, so it has no per-request value:
  a request meets an ITL SLO when its largest gap does.

Pure: imports neither Locust nor anything that does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.metrics import declarations

STATISTICS = ("p50", "p90", "p95", "p99", "p99_9", "mean", "max")
_SYNTAX = re.compile(r"^(?P<metric>[a-z0-9]+)_(?P<stat>p\d+(?:_\d+)?|mean|max)_ms=(?P<value>.+)$")


@dataclass(frozen=True, slots=True)
class Slo:
    """One objective: `stat` of `metric` at most `max_ms` milliseconds."""

    metric: str
    stat: str
    max_ms: float

    @property
    def name(self) -> str:
        """The objective as written: `ttft_p90_ms`."""
        return f"{self.metric}_{self.stat}_ms"

    def __str__(self) -> str:
        return f"{self.name}={self.max_ms:g}"


@dataclass(frozen=True, slots=True)
class SloResult:
    """An objective checked against a distribution: the measured value (ms; None = no data)."""

    slo: Slo
    value_ms: float | None

    @property
    def ok(self) -> bool:
        """True when there is data and it is within the objective."""
        return self.value_ms is not None and self.value_ms <= self.slo.max_ms

    def as_dict(self) -> dict[str, Any]:
        """The result as written to summary.json."""
        return {"slo": str(self.slo), "value_ms": self.value_ms, "max_ms": self.slo.max_ms, "ok": self.ok}


def parse_slo(text: str) -> Slo:
    """Parse `ttft_p90_ms=2000`; raise ConfigError naming the problem and the syntax."""
    match = _SYNTAX.match(text.strip().lower())
    hint = "expected METRIC_STAT_ms=VALUE, e.g. ttft_p90_ms=2000"
    if match is None:
        raise ConfigError(f"--slo {text!r}: {hint}")
    metric, stat = match["metric"], match["stat"]
    metrics = declarations.names(declarations.latencies(slo=True))
    if metric not in metrics:
        raise ConfigError(f"--slo {text!r}: unknown metric {metric!r} (one of {', '.join(metrics)})")
    if stat not in STATISTICS:
        raise ConfigError(f"--slo {text!r}: unknown statistic {stat!r} (one of {', '.join(STATISTICS)})")
    try:
        max_ms = float(match["value"])
    except ValueError:
        raise ConfigError(f"--slo {text!r}: {match['value']!r} is not a number; {hint}") from None
    if not max_ms > 0:
        raise ConfigError(f"--slo {text!r}: the threshold must be > 0 ms")
    return Slo(metric, stat, max_ms)


def parse_slos(texts: Iterable[str]) -> tuple[Slo, ...]:
    """Parse several `--slo` values (each may hold several, comma-separated)."""
    return tuple(parse_slo(part) for text in texts for part in text.split(",") if part.strip())


def evaluate(slos: Iterable[Slo], metrics: Mapping[str, Mapping[str, Any]]) -> list[SloResult]:
    """Check each objective against `metrics` (a summary.json `metrics` object: `ttft_ms` -> stats)."""
    return [SloResult(slo, metrics.get(f"{slo.metric}_ms", {}).get(slo.stat)) for slo in slos]


def request_meets(slos: Iterable[Slo], values_ms: Mapping[str, float | None]) -> bool:
    """True when one request's values (ms; metric -> value, e.g. its max ITL for `itl`) meet every
    objective; a value the request does not have (None: TPOT of a one-token answer) is not held
    against it."""
    for slo in slos:
        value = values_ms.get(slo.metric)
        if value is not None and value > slo.max_ms:
            return False
    return True
