"""The run's objectives (`ObjectiveSettings`): SLOs, the error-rate gate and the drift check, validated from
Locust's parsed options; each option declared on its field.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.metrics.slo import Slo, parse_slos
from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE
from llm_locust.option_values import above, as_list, at_least, between, build, option, optional_float, shown_as


@dataclass(frozen=True)
class ObjectiveSettings:
    """What the run is judged by: `--slo` objectives (goodput, verdict), the largest error rate that passes (a
    fraction; `DEFAULT_MAX_ERROR_RATE` unless given, also when the web UI's field is left empty; 1: any), the largest
    latency drift (percent; None: not gated), the lowest accuracy of the scored answers that passes (a fraction;
    None: not gated), the most the client may have moved ITL p99 before the run is client_limited (ms,
    `metrics.client_error`), and the drift check's window and warm-up (s)."""

    slo: tuple[Slo, ...] = field(
        metadata=option(
            "Service-level objective METRIC_STAT_ms=VALUE, e.g. ttft_p90_ms=2000 (repeat, or comma-separate): goodput "
            "counts the requests meeting every one; the summary checks each against the run",
            None,  # not [] (also --image, --header): the web UI would parse a list field's text as integers
            repeat=True,
        )
        | shown_as(lambda slos: [str(slo) for slo in slos])
    )
    max_error_rate: float = field(
        metadata=option(
            "Fail the run (exit code 3) when failed / all requests exceeds this fraction; also the limit of each "
            f"sweep step and search trial (default {DEFAULT_MAX_ERROR_RATE:g}: a run where more than 1 % of the "
            "requests failed never passes; 1: no limit)",
            DEFAULT_MAX_ERROR_RATE,
            check=between(0, 1, "a fraction", "e.g. 0.01"),
        )
    )
    max_drift_pct: float | None = field(
        metadata=option(
            "Fail the run (exit code 3) when TTFT/TPOT percentiles rose or throughput fell by more than this "
            "percentage between the early and the late drift window",
            None,
            check=at_least(0, "a percentage, e.g. 20"),
        )
    )
    min_accuracy: float | None = field(
        metadata=option(
            "Fail the run (exit code 3) when the accuracy of its scored answers (a --dataset with references, or "
            "score= in a scenario) is below this fraction, e.g. 0.9, or when no answer was scored",
            None,
            check=between(0, 1, "a fraction", "e.g. 0.9"),
        )
    )
    max_client_error_ms: float | None = field(
        metadata=option(
            "The most the client may have moved ITL p99 (its error budget, summary.json client_error), ms, e.g. 1; "
            "above it the run is client_limited and fails (exit code 5). Default: the budget is stated, not judged",
            None,
            env_var="LOCUST_MAX_CLIENT_ERROR_MS",
            check=above(0, "ms, e.g. 1"),
        )
    )
    drift_window_s: float = field(
        metadata=option("Length of the early and of the late window compared for drift, seconds", 300.0, check=above(0))
    )
    drift_warmup_s: float = field(
        metadata=option(
            "Time after the start left out of the early drift window (ramp-up, caches), seconds",
            60.0,
            check=at_least(0),
        )
    )

    @classmethod
    def from_options(cls, options: Any) -> ObjectiveSettings:
        """Validated from `options`; ConfigError naming a gate or drift option out of its range, or a bad SLO."""
        max_error_rate = optional_float(options, "max_error_rate")  # the web UI's form may send it empty
        return build(
            cls,
            options,
            slo=parse_slos(as_list(options.slo)),
            max_error_rate=DEFAULT_MAX_ERROR_RATE if max_error_rate is None else max_error_rate,
            max_drift_pct=optional_float(options, "max_drift_pct"),
            min_accuracy=optional_float(options, "min_accuracy"),
            max_client_error_ms=optional_float(options, "max_client_error_ms"),
        )
