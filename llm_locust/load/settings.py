"""The load's settings (`LoadSettings`): the load model — closed loop, rate, sweep, capacity search or trace
replay — and the run's limits, validated from Locust's parsed options; each option declared on its field.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.load.arrivals import ARRIVAL_KINDS, ArrivalKind, Step, parse_number_list, sweep_steps
from llm_locust.load.backoff import DEFAULT_MAX_S as DEFAULT_BACKOFF_MAX_S
from llm_locust.load.step_end import MIN_REQUESTS
from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE
from llm_locust.option_values import above, at_least, between, build, option
from llm_locust.workload.traces import TRACE_FORMATS, TraceWindow


@dataclass(frozen=True)
class LoadSettings:
    """How requests are offered: the arrival process (`request_rate` in requests/s in total, 0: closed loop), the
    sweeps and their steps, the capacity search (`search_max_rate` 0: none), the trace to replay and its timing, the
    limits (concurrency, requests, error rate that aborts), and a closed-loop user's longest pause after failures
    without an answer (`backoff_max_s`, seconds; 0: none; `load.backoff`)."""

    request_rate: float = field(
        metadata=option(
            "Open loop: send R requests/s in total, split across all workers (0: closed loop, each user sends its next "
            "request when the last ended); -u is then only the cap on requests in flight",
            0.0,
            check=at_least(0, "requests/s; 0: closed loop"),
        )
    )
    arrival: ArrivalKind = field(
        metadata=option(
            "Arrival process of --request-rate / --sweep-rates: poisson (default), constant, gamma",
            "poisson",
            choices=ARRIVAL_KINDS,
        )
    )
    burstiness: float = field(
        metadata=option(
            "Gamma arrivals' shape: 1 = Poisson, < 1 burstier, > 1 more regular (default 1)", 1.0, check=above(0)
        )
    )
    sweep_users: str = field(metadata=option("Concurrency sweep, e.g. 1,2,4,8,16 (needs -f locustfiles/sweep.py)"))
    sweep_rates: str = field(
        metadata=option("Request-rate sweep in req/s, e.g. 1,2,4,8 (needs -f locustfiles/sweep.py)")
    )
    sweep_prompt_tokens: str = field(
        metadata=option(
            "Prompt-length sweep in tokens, e.g. 8,128,512,1024,2048; with --sweep-users/--sweep-rates a grid (each "
            "length in turn, the load rising within it; needs -f locustfiles/sweep.py)"
        )
    )
    sweep_max_tokens: str = field(
        metadata=option(
            "Output-length sweep (max_tokens per request), e.g. 64,256,1024; combines like --sweep-prompt-tokens"
        )
    )
    step_duration_s: float = field(metadata=option("Length of each sweep step (or search trial), seconds", 30.0))
    warmup_s: float = field(
        metadata=option("Start of each sweep step (or search trial) left out of its metrics, seconds (default 5)", 5.0)
    )
    precision: str = field(
        metadata=option(
            "End a sweep step (or search trial) once its SLO percentiles' and its throughput's 95 % intervals are "
            "within this share of their value, e.g. 5% or 0.05 (--step-duration-s is the most a step lasts; default: "
            "every step runs its whole duration)"
        )
    )
    precision_min_requests: int = field(
        metadata=option(
            f"With --precision: the fewest measured requests a step may end on (default {MIN_REQUESTS})",
            MIN_REQUESTS,
            check=at_least(1),
        )
    )
    max_concurrency: int = field(
        metadata=option(
            "Rate sweep or search: users per step, the cap on requests in flight (default 256)", 256, check=at_least(1)
        )
    )
    search_max_rate: float = field(
        metadata=option(
            "Capacity search (needs -f locustfiles/search.py): the highest rate in req/s tried; the search finds the "
            "highest rate meeting every --slo with at most --max-error-rate failed (default "
            f"{DEFAULT_MAX_ERROR_RATE:g})",
            0.0,
            check=at_least(0, "requests/s; 0: no search"),
        )
    )
    search_precision: float = field(
        metadata=option(
            "Capacity search: stop when the passing and the failing rate are this share apart (default 0.05)", 0.05
        )
    )
    search_budget_s: float = field(
        metadata=option(
            "Capacity search: start no trial that would end later than this after the start, seconds (default 900)",
            900.0,
        )
    )
    max_requests: int = field(
        metadata=option(
            "End the run after this many requests in total across workers (0: no limit)",
            0,
            check=at_least(0, "0: no limit"),
        )
    )
    abort_error_rate: float = field(
        metadata=option(
            "End the run early once more than this share of requests failed (e.g. 0.5; checked after 20 requests; "
            "0: never)",
            0.0,
            check=between(0, 1, "a fraction"),
        )
    )
    trace: str = field(
        metadata=option(
            "Trace file to replay (locustfiles/trace.py): each request sent once, by one worker, at its time",
            startup_only=True,
        )
    )
    trace_format: str = field(
        metadata=option("mooncake (JSONL, default), azure, burstgpt", "mooncake", choices=TRACE_FORMATS)
    )
    trace_speedup: float = field(metadata=option("Replay X times faster (default 1)", 1.0, check=above(0)))
    trace_start_s: float = field(
        metadata=option("Start the replay this many trace seconds in (default 0)", 0.0, check=at_least(0))
    )
    trace_duration_s: float = field(
        metadata=option("Replay this many trace seconds (0: to the end)", 0.0, check=at_least(0, "0: no limit"))
    )
    trace_max_requests: int = field(
        metadata=option("Replay at most N requests (0: all)", 0, check=at_least(0, "0: no limit"))
    )
    trace_model: str = field(metadata=option("BurstGPT: keep only this Model (e.g. ChatGPT, GPT-4)"))
    trace_log_type: str = field(metadata=option("BurstGPT: keep only this Log Type (e.g. 'Conversation log')"))
    max_sessions: int = field(
        metadata=option(
            "Agent sessions: end the run after this many sessions ended, in total across workers (0: no limit)",
            0,
            check=at_least(0, "0: no limit"),
        )
    )
    backoff_max_s: float = field(
        metadata=option(
            "Closed loop: a user whose request failed without an answer (refused, reset, TLS, not a stream) pauses "
            "0.1 s before its next one, doubling per such failure in a row up to this many seconds, until a success "
            f"(default {DEFAULT_BACKOFF_MAX_S:g}; 0: never pause)",
            DEFAULT_BACKOFF_MAX_S,
            check=at_least(0, "seconds; 0: no pause"),
        )
    )

    @classmethod
    def from_options(cls, options: Any) -> LoadSettings:
        """Validated from `options` (the sweep's steps too); ConfigError naming the first bad option."""
        if options.trace and (options.request_rate or options.sweep_rates or options.sweep_users):
            raise ConfigError("--trace replays the trace's own timing: leave out --request-rate and the sweeps")
        if options.request_rate and options.sweep_rates:
            raise ConfigError(
                "--request-rate and --sweep-rates exclude each other: the sweep sets the rate of each step"
            )
        settings = build(cls, options)  # each option alone checked
        _check_search(options)
        precision_share(options.precision)
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
