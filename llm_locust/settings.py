"""The run's LLM settings: Locust command-line options and the typed object built from them.

Options are registered on Locust's parser (so they work on the command line, in config files,
in the web UI, and reach workers from the master). `Settings.from_options` validates them once
and everything else receives the `Settings` object, never the raw options.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import orjson

from llm_locust.errors import ConfigError
from llm_locust.slo import Slo, parse_slos

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


def add_arguments(parser: Any) -> None:
    """Register llm-locust's options on Locust's argument parser (shown in its web UI form too)."""
    group = _WebUIGroup(parser.add_argument_group("llm-locust", "LLM endpoint, workload and results options"))
    group.add_argument(
        "--model", default="", help="Model name sent in each request (default: the first of GET /v1/models)"
    )
    group.add_argument(
        "--prompt-tokens", type=int, default=128, help="Length of the synthetic prompt, in tokens (~words)"
    )
    group.add_argument("--max-tokens", type=int, default=128, help="max_tokens of each request")
    group.add_argument(
        "--ignore-eos",
        action="store_true",
        default=False,
        help="Send ignore_eos=true (vLLM, SGLang, simulator) so every output has max_tokens tokens",
    )
    group.add_argument(
        "--api-key-env",
        default=DEFAULT_API_KEY_ENV,
        help="Environment variable holding the API key sent as 'Authorization: Bearer' (never printed)",
    )
    group.add_argument(
        "--api-key",
        default="",
        is_secret=True,
        help="API key (prefer --api-key-env: a flag is visible in the process list); never printed",
    )
    group.add_argument(
        "--extra-body",
        default="",
        help="JSON object merged into every request body, e.g. '{\"temperature\": 0}'",
    )
    group.add_argument("--connect-timeout-s", type=float, default=10.0, help="Timeout to open a connection, seconds")
    group.add_argument(
        "--read-timeout-s",
        type=float,
        default=120.0,
        help="Longest silence allowed while waiting for the response or between stream events, seconds",
    )
    group.add_argument(
        "--request-timeout-s",
        type=float,
        default=600.0,
        help="Longest time allowed for one whole request, seconds",
    )
    group.add_argument(
        "--results-dir",
        default="",
        help="Folder for summary.json and llm_timeseries.csv (default: the folder of --csv, else results/<date-time>)",
    )
    group.add_argument(
        "--slo",
        action="append",
        default=[],
        help="Service-level objective METRIC_STAT_ms=VALUE, e.g. ttft_p90_ms=2000 (repeat, or comma-separate): "
        "goodput counts the requests meeting every one; the summary checks each against the run",
    )
    group.add_argument(
        "--interval-s",
        type=float,
        default=5.0,
        help="Width of one row of the LLM time series (llm_timeseries.csv), seconds",
    )
    _add_gate_arguments(group)


def _add_gate_arguments(group: Any) -> None:
    """Pass/fail gates and drift windows (llm_locust.gates, llm_locust.drift)."""
    group.add_argument(
        "--max-error-rate",
        type=float,
        default=None,
        help="Fail the run (exit code 3) when failed / all requests exceeds this fraction, e.g. 0.01",
    )
    group.add_argument(
        "--max-drift-pct",
        type=float,
        default=None,
        help="Fail the run (exit code 3) when TTFT/TPOT percentiles rose or throughput fell by more than this "
        "percentage between the early and the late drift window",
    )
    group.add_argument(
        "--drift-window-s",
        type=float,
        default=300.0,
        help="Length of the early and of the late window compared for drift, seconds",
    )
    group.add_argument(
        "--drift-warmup-s",
        type=float,
        default=60.0,
        help="Time after the start left out of the early drift window (ramp-up, caches), seconds",
    )


class _WebUIGroup:
    """An argument group whose options Locust's web UI shows (`is_secret` ones masked).

    Locust only marks options added with its parser's own `add_argument`; groups are plain
    argparse, so the same two attributes are set here.
    """

    def __init__(self, group: Any) -> None:
        self._group = group

    def add_argument(self, *args: Any, is_secret: bool = False, **kwargs: Any) -> Any:
        action = self._group.add_argument(*args, **kwargs)
        action.include_in_web_ui = True
        action.is_secret = is_secret
        return action


@dataclass(frozen=True)
class Settings:
    """Validated LLM settings of a run. `api_key` never appears in repr, logs or results."""

    model: str = ""
    prompt_tokens: int = 128
    max_tokens: int = 128
    ignore_eos: bool = False
    api_key: str = field(default="", repr=False)
    api_key_env: str = DEFAULT_API_KEY_ENV
    extra_body: dict[str, Any] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    request_timeout_s: float = 600.0
    results_dir: str = ""
    slo: tuple[Slo, ...] = ()
    interval_s: float = 5.0
    max_error_rate: float | None = None
    max_drift_pct: float | None = None
    drift_window_s: float = 300.0
    drift_warmup_s: float = 60.0

    @classmethod
    def from_options(cls, options: Any) -> Settings:
        """Build from Locust's parsed options; raise ConfigError naming the bad option."""
        extra_body: dict[str, Any] = {}
        if options.extra_body:
            try:
                extra_body = orjson.loads(options.extra_body)
            except orjson.JSONDecodeError as e:
                raise ConfigError(f"--extra-body is not valid JSON: {e}") from None
            if not isinstance(extra_body, dict):
                raise ConfigError("--extra-body must be a JSON object, e.g. '{\"temperature\": 0}'")
        for name in ("prompt_tokens", "max_tokens"):
            if getattr(options, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(options, name)}")
        for name in ("connect_timeout_s", "read_timeout_s", "request_timeout_s", "interval_s"):
            if not getattr(options, name) > 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {getattr(options, name)}")
        gates = {name: _optional_float(options, name) for name in ("max_error_rate", "max_drift_pct")}
        _check_gates(options, **gates)
        derived = {
            **gates,
            "api_key": options.api_key or os.environ.get(options.api_key_env, ""),
            "extra_body": extra_body,
            "slo": parse_slos(_as_list(options.slo)),
            "results_dir": options.results_dir or _default_results_dir(getattr(options, "csv_prefix", None)),
        }
        given = {f.name: getattr(options, f.name) for f in fields(cls) if f.name not in derived}
        return cls(**given, **derived)

    def public(self) -> dict[str, Any]:
        """The settings as written to results: the API key only as present or not."""
        settings = asdict(self)
        del settings["api_key"], settings["results_dir"]
        return {**settings, "slo": [str(slo) for slo in self.slo], "api_key_set": bool(self.api_key)}


def _optional_float(options: Any, name: str) -> float | None:
    """An option without default: None when unset (the web UI sends "" or the text typed), else a float."""
    value = getattr(options, name)
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"--{name.replace('_', '-')} must be a number, got {value!r}") from None


def _check_gates(options: Any, max_error_rate: float | None, max_drift_pct: float | None) -> None:
    """Raise ConfigError naming a gate or drift option out of its range."""
    if max_error_rate is not None and not 0 <= max_error_rate <= 1:
        raise ConfigError(f"--max-error-rate must be a fraction in [0, 1], e.g. 0.01, got {max_error_rate:g}")
    if max_drift_pct is not None and not max_drift_pct >= 0:
        raise ConfigError(f"--max-drift-pct must be >= 0 (a percentage, e.g. 20), got {max_drift_pct:g}")
    if not options.drift_window_s > 0:
        raise ConfigError(f"--drift-window-s must be > 0, got {options.drift_window_s}")
    if not options.drift_warmup_s >= 0:
        raise ConfigError(f"--drift-warmup-s must be >= 0, got {options.drift_warmup_s}")


def _as_list(value: str | list[str] | None) -> list[str]:
    """An append option's value: a list from the command line, a string from a config file or the web UI."""
    if not value:
        return []
    return [value] if isinstance(value, str) else list(value)


def _default_results_dir(csv_prefix: str | None) -> str:
    """The folder of Locust's --csv prefix if given, else results/<local date-time>."""
    if csv_prefix:
        return os.path.dirname(csv_prefix) or "."
    return os.path.join("results", time.strftime("%Y%m%d-%H%M%S"))
