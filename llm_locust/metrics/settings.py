"""The run's objectives (`ObjectiveSettings`): SLOs, the error-rate gate and the drift check, validated from
Locust's parsed options.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.metrics.client_error import DEFAULT_MAX_CLIENT_ERROR_MS
from llm_locust.metrics.slo import Slo, parse_slos
from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE
from llm_locust.option_values import as_list, build, optional_float, shown_as


@dataclass(frozen=True)
class ObjectiveSettings:
    """What the run is judged by: `--slo` objectives (goodput, verdict), the largest error rate that passes (a
    fraction; `DEFAULT_MAX_ERROR_RATE` unless given, also when the web UI's field is left empty; 1: any), the largest
    latency drift (percent; None: not gated), the lowest accuracy of the scored answers that passes (a fraction;
    None: not gated), the most the client may have moved ITL p99 before the run is client_limited (ms,
    `metrics.client_error`), and the drift check's window and warm-up (s)."""

    slo: tuple[Slo, ...] = field(metadata=shown_as(lambda slos: [str(slo) for slo in slos]))
    max_error_rate: float
    max_drift_pct: float | None
    min_accuracy: float | None
    max_client_error_ms: float
    drift_window_s: float
    drift_warmup_s: float

    @classmethod
    def from_options(cls, options: Any) -> ObjectiveSettings:
        """Validated from `options`; ConfigError naming a gate or drift option out of its range, or a bad SLO."""
        max_error_rate = optional_float(options, "max_error_rate")
        if max_error_rate is None:
            max_error_rate = DEFAULT_MAX_ERROR_RATE
        max_drift_pct = optional_float(options, "max_drift_pct")
        min_accuracy = optional_float(options, "min_accuracy")
        if min_accuracy is not None and not 0 <= min_accuracy <= 1:
            raise ConfigError(f"--min-accuracy must be a fraction in [0, 1], e.g. 0.9, got {min_accuracy:g}")
        if not 0 <= max_error_rate <= 1:
            raise ConfigError(f"--max-error-rate must be a fraction in [0, 1], e.g. 0.01, got {max_error_rate:g}")
        if max_drift_pct is not None and not max_drift_pct >= 0:
            raise ConfigError(f"--max-drift-pct must be >= 0 (a percentage, e.g. 20), got {max_drift_pct:g}")
        max_client_error_ms = optional_float(options, "max_client_error_ms")
        if max_client_error_ms is None:
            max_client_error_ms = DEFAULT_MAX_CLIENT_ERROR_MS
        if not max_client_error_ms > 0:
            raise ConfigError(f"--max-client-error-ms must be > 0 (ms, e.g. 1), got {max_client_error_ms:g}")
        if not options.drift_window_s > 0:
            raise ConfigError(f"--drift-window-s must be > 0, got {options.drift_window_s}")
        if not options.drift_warmup_s >= 0:
            raise ConfigError(f"--drift-warmup-s must be >= 0, got {options.drift_warmup_s}")
        return build(
            cls,
            options,
            slo=parse_slos(as_list(options.slo)),
            max_error_rate=max_error_rate,
            max_drift_pct=max_drift_pct,
            min_accuracy=min_accuracy,
            max_client_error_ms=max_client_error_ms,
        )
