"""The load's settings (`LoadSettings`): the load model — closed loop, rate, sweep, capacity search or trace
replay — and the run's limits, validated from Locust's parsed options.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.load.arrivals import ArrivalKind, Step, parse_number_list, sweep_steps
from llm_locust.option_values import build
from llm_locust.workload.traces import TraceWindow


@dataclass(frozen=True)
class LoadSettings:
    """How requests are offered: the arrival process (`request_rate` in requests/s in total, 0: closed loop), the
    sweeps and their steps, the capacity search (`search_max_rate` 0: none), the trace to replay and its timing, the
    limits (concurrency, requests, error rate that aborts), and a closed-loop user's longest pause after failures
    without an answer (`backoff_max_s`, seconds; 0: none; `load.backoff`)."""

    request_rate: float
    arrival: ArrivalKind
    burstiness: float
    sweep_users: str
    sweep_rates: str
    sweep_prompt_tokens: str
    sweep_max_tokens: str
    step_duration_s: float
    warmup_s: float
    precision: str
    precision_min_requests: int
    max_concurrency: int
    search_max_rate: float
    search_precision: float
    search_budget_s: float
    max_requests: int
    abort_error_rate: float
    trace: str
    trace_format: str
    trace_speedup: float
    trace_start_s: float
    trace_duration_s: float
    trace_max_requests: int
    trace_model: str
    trace_log_type: str
    max_sessions: int
    backoff_max_s: float

    @classmethod
    def from_options(cls, options: Any) -> LoadSettings:
        """Validated from `options` (the sweep's steps too); ConfigError naming the first bad option."""
        if options.trace and (options.request_rate or options.sweep_rates or options.sweep_users):
            raise ConfigError("--trace replays the trace's own timing: leave out --request-rate and the sweeps")
        for name in ("trace_start_s", "trace_duration_s", "trace_max_requests"):
            if getattr(options, name) < 0:
                raise ConfigError(
                    f"--{name.replace('_', '-')} must be >= 0 (0: no limit), got {getattr(options, name)}"
                )
        if not options.trace_speedup > 0:
            raise ConfigError(f"--trace-speedup must be > 0, got {options.trace_speedup}")
        if options.request_rate < 0:
            raise ConfigError(f"--request-rate must be >= 0 requests/s (0: closed loop), got {options.request_rate}")
        if not options.burstiness > 0:
            raise ConfigError(f"--burstiness must be > 0, got {options.burstiness}")
        if options.request_rate and options.sweep_rates:
            raise ConfigError(
                "--request-rate and --sweep-rates exclude each other: the sweep sets the rate of each step"
            )
        if options.max_concurrency < 1:
            raise ConfigError(f"--max-concurrency must be >= 1, got {options.max_concurrency}")
        if options.max_requests < 0:
            raise ConfigError(f"--max-requests must be >= 0 (0: no limit), got {options.max_requests}")
        if options.max_sessions < 0:
            raise ConfigError(f"--max-sessions must be >= 0 (0: no limit), got {options.max_sessions}")
        if options.backoff_max_s < 0:
            raise ConfigError(f"--backoff-max-s must be >= 0 seconds (0: no pause), got {options.backoff_max_s}")
        _check_search(options)
        precision_share(options.precision)
        if options.precision_min_requests < 1:
            raise ConfigError(f"--precision-min-requests must be >= 1, got {options.precision_min_requests}")
        if not 0 <= options.abort_error_rate <= 1:
            raise ConfigError(f"--abort-error-rate must be between 0 and 1, got {options.abort_error_rate}")
        settings = build(cls, options)
        _ = settings.steps  # a bad sweep raises here, once
        return settings

    @property
    def steps(self) -> tuple[Step, ...]:
        """The sweep's steps (empty when the run is not a sweep)."""
        return sweep_steps(
            parse_number_list("--sweep-users", self.sweep_users, int) if self.sweep_users else [],
            parse_number_list("--sweep-rates", self.sweep_rates, float) if self.sweep_rates else [],
            self.max_concurrency,
            self.step_duration_s,
            self.warmup_s,
            _lengths("--sweep-prompt-tokens", self.sweep_prompt_tokens),
            _lengths("--sweep-max-tokens", self.sweep_max_tokens),
        )

    @property
    def precision_share(self) -> float | None:
        """`--precision` as a share (0.05 for 5 %); None: steps run their whole duration."""
        return precision_share(self.precision)

    @property
    def load_model(self) -> str:
        """concurrency, rate, concurrency_sweep, rate_sweep, rate_search or trace."""
        if self.sweep_users:
            return "concurrency_sweep"
        if self.sweep_rates:
            return "rate_sweep"
        if self.search_max_rate:
            return "rate_search"
        if self.sweep_prompt_tokens or self.sweep_max_tokens:
            return "concurrency_sweep"  # a length sweep at 1 user
        if self.trace:
            return "trace"
        return "rate" if self.request_rate else "concurrency"

    def trace_window(self) -> TraceWindow:
        """Which part of `--trace` to replay, and how fast."""
        return TraceWindow(
            speedup=self.trace_speedup,
            start_s=self.trace_start_s,
            duration_s=self.trace_duration_s or None,
            max_requests=self.trace_max_requests or None,
            model=self.trace_model,
            log_type=self.trace_log_type,
        )


def precision_share(text: str) -> float | None:
    """`5%` or `0.05` -> 0.05; '' -> None; ConfigError for anything that is not a share between 0 and 1."""
    text = str(text or "").strip()
    if not text:
        return None
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ConfigError(f"--precision {text!r}: give a share such as 5% or 0.05") from None
    if not 0 < share < 1:
        raise ConfigError(f"--precision {text!r}: must be between 0 and 100 %, e.g. 5%")
    return share


def _lengths(option: str, text: str) -> list[int]:
    """A swept length list (`8,128,512`), [] when not given."""
    return parse_number_list(option, text, int) if text else []


def _check_search(options: Any) -> None:
    """Validate the capacity-search options; ConfigError naming the first bad one."""
    if options.search_max_rate < 0:
        raise ConfigError(f"--search-max-rate must be > 0 requests/s (0: no search), got {options.search_max_rate}")
    if not options.search_max_rate:
        return
    for other in ("request_rate", "sweep_rates", "sweep_users"):
        if getattr(options, other):
            flag = "--" + other.replace("_", "-")
            raise ConfigError(
                f"--search-max-rate and {flag} exclude each other: the search sets the rate of each trial"
            )
    if not 0 < options.search_precision < 1:
        raise ConfigError(
            f"--search-precision must be a fraction between 0 and 1, e.g. 0.05, got {options.search_precision}"
        )
    if not options.search_budget_s > 0:
        raise ConfigError(f"--search-budget-s must be > 0 seconds, got {options.search_budget_s}")
    # a trial is a rate step: the same --step-duration-s, --warmup-s and --max-concurrency rules
    sweep_steps([], [options.search_max_rate], options.max_concurrency, options.step_duration_s, options.warmup_s)
