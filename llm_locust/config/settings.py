"""The run's LLM settings: the typed, validated object built from the options (`options.add_arguments`).

`Settings.from_options` validates the options once and everything else receives the `Settings` object, never
the raw options.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import orjson

from llm_locust import redact
from llm_locust.config.options import DEFAULT_AZURE_API_VERSION, SECRET_OPTIONS
from llm_locust.errors import ConfigError
from llm_locust.load.arrivals import ArrivalKind, Step, parse_number_list, sweep_steps
from llm_locust.metrics.slo import Slo, parse_slos
from llm_locust.scrape.server_maps import load_maps
from llm_locust.transport.ca_file import check_ca_file
from llm_locust.transport.proxy import proxy_urls
from llm_locust.transport.replicas import split_hosts
from llm_locust.workload.datasets import load_dataset
from llm_locust.workload.input_images import file_data_url, parse_size
from llm_locust.workload.lengths import LengthDist, parse_length
from llm_locust.workload.providers import (
    API_KEY_ENV,
    PROVIDERS,
    check_length_control,
    parse_header,
    server_family,
)
from llm_locust.workload.tokens import token_counter
from llm_locust.workload.traces import TraceWindow


@dataclass(frozen=True)
class Settings:
    """Validated LLM settings of a run. `api_key` never appears in repr, logs or results."""

    model: str = ""
    api_key: str = field(default="", repr=False)
    api_key_env: str = "OPENAI_API_KEY"
    extra_body: dict[str, Any] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    first_token_timeout_s: float = 300.0
    request_timeout_s: float = 600.0
    results_dir: str = ""
    request_rate: float = 0.0  # requests/s in total, 0 = closed loop
    arrival: ArrivalKind = "poisson"
    burstiness: float = 1.0
    sweep_users: str = ""
    sweep_rates: str = ""
    sweep_prompt_tokens: str = ""
    sweep_max_tokens: str = ""
    step_duration_s: float = 30.0
    warmup_s: float = 5.0
    max_concurrency: int = 256
    search_max_rate: float = 0.0  # req/s, 0 = no capacity search
    search_precision: float = 0.05
    search_budget_s: float = 900.0
    max_requests: int = 0
    abort_error_rate: float = 0.0
    slo: tuple[Slo, ...] = ()
    interval_s: float = 5.0
    metrics_url: tuple[str, ...] = ()
    metrics_interval_s: float = 2.0
    metrics_map: str = ""
    # workload (add_workload_arguments)
    prompt_tokens: LengthDist = field(default_factory=lambda: LengthDist("fixed", 128))
    max_tokens: LengthDist = field(default_factory=lambda: LengthDist("fixed", 128))
    ignore_eos: bool = False
    seed: int | None = None
    prefix_tokens: int = 0
    prefix_pool: int = 1
    prefix_zipf: float = 0.0
    session_header: str = ""
    tokenizer: str = ""
    dataset: str = ""
    dataset_format: str = ""
    image: tuple[str, ...] = ()
    image_size: tuple[int, int] | None = None
    embedding_batch: int = 1
    # provider (add_provider_arguments)
    provider: str = "openai-compatible"
    deployment: str = ""
    api_version: str = DEFAULT_AZURE_API_VERSION
    server_family: str = "vllm"
    header: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    ca_bundle: str = ""
    insecure: bool = False
    client: str = "fast"
    max_error_rate: float | None = None
    max_drift_pct: float | None = None
    drift_window_s: float = 300.0
    drift_warmup_s: float = 60.0
    # replicas and cancellation (add_replica_and_cancel_arguments)
    balance: str = "round-robin"
    cancel_rate: float = 0.0
    cancel_after_tokens: int = 0
    cancel_after_ms: float = 0.0
    # trace replay (add_trace_arguments)
    trace: str = ""
    trace_format: str = "mooncake"
    trace_speedup: float = 1.0
    trace_start_s: float = 0.0
    trace_duration_s: float = 0.0
    trace_max_requests: int = 0
    trace_model: str = ""
    trace_log_type: str = ""

    @classmethod
    def from_options(cls, options: Any) -> Settings:
        """Build from Locust's parsed options (their secrets registered with `redact` first);
        raise ConfigError naming the bad option."""
        register_secrets(options)
        extra_body: dict[str, Any] = {}
        if options.extra_body:
            try:
                extra_body = orjson.loads(options.extra_body)
            except orjson.JSONDecodeError as e:
                raise ConfigError(f"--extra-body is not valid JSON: {e}") from None
            if not isinstance(extra_body, dict):
                raise ConfigError("--extra-body must be a JSON object, e.g. '{\"temperature\": 0}'")
        for name in ("connect_timeout_s", "read_timeout_s", "first_token_timeout_s", "request_timeout_s", "interval_s"):
            if not getattr(options, name) > 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {getattr(options, name)}")
        _check_load(options)
        gates = {name: _optional_float(options, name) for name in ("max_error_rate", "max_drift_pct")}
        _check_gates(options, **gates)
        _check_cancel(options)
        api_key_env = options.api_key_env or API_KEY_ENV[options.provider]
        derived = {
            **gates,
            "api_key": options.api_key or os.environ.get(api_key_env, ""),
            "api_key_env": api_key_env,
            "extra_body": extra_body,
            "slo": parse_slos(_as_list(options.slo)),
            "results_dir": options.results_dir or _default_results_dir(getattr(options, "csv_prefix", None)),
            "metrics_url": _metrics_urls(options),
            **_workload_and_provider(options),
        }
        given = {f.name: getattr(options, f.name) for f in fields(cls) if f.name not in derived}
        settings = cls(**given, **derived)
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
    def prompt_buckets(self) -> bool:
        """True when prompt lengths vary within the run (a length sweep, a distribution, a dataset): each request
        then also counts in its prompt-length bucket (`metrics.length_buckets`)."""
        return bool(self.sweep_prompt_tokens or self.dataset or self.prompt_tokens.kind != "fixed")

    @property
    def load_model(self) -> str:
        """concurrency, rate, concurrency_sweep, rate_sweep or rate_search."""
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

    def public(self) -> dict[str, Any]:
        """The settings as written to results: the API key only as present or not."""
        settings = asdict(self)
        del settings["api_key"], settings["results_dir"]
        settings.update(
            prompt_tokens=str(self.prompt_tokens),
            max_tokens=str(self.max_tokens),
            header=[name for name, _ in self.header],  # names only: values may be credentials
            slo=[str(slo) for slo in self.slo],
            metrics_url=[redact.redact(url) for url in self.metrics_url],
        )
        return {**settings, "api_key_set": bool(self.api_key)}


def _lengths(option: str, text: str) -> list[int]:
    """A swept length list (`8,128,512`), [] when not given."""
    return parse_number_list(option, text, int) if text else []


def register_secrets(options: Any) -> None:
    """Register with `redact` every secret `options` hold: the API key (--api-key, or the variable
    named by --api-key-env or the provider's default), each --header value, and the credentials in
    --host, every --metrics-url and the proxy variables (HTTPS_PROXY ...). The one place the
    registry is filled; called by `Settings.from_options` in every process (workers get the
    master's options)."""
    provider = options.provider if options.provider in API_KEY_ENV else PROVIDERS[0]
    redact.register(options.api_key)
    redact.register(os.environ.get(options.api_key_env or API_KEY_ENV[provider]))
    for text in _as_list(options.header):
        redact.register(text.partition(":")[2].strip())
    hosts = split_hosts(getattr(options, "host", None))
    for url in (*hosts, *_as_list(getattr(options, "metrics_url", None)), *proxy_urls()):
        redact.register_url(url)


def secret_options(options: Any) -> dict[str, Any]:
    """The values of the `SECRET_OPTIONS` in `options` (to restore them with `keep_secrets`)."""
    return {name: getattr(options, name, None) for name in SECRET_OPTIONS}


def keep_secrets(options: Any, given: dict[str, Any]) -> None:
    """Put back the `given` secret options (`secret_options`) that `options` now hold empty.

    The web UI's form shows a secret field empty and sends it back so (a list option as `['']`):
    a test started with the field left empty keeps the value given at start-up.
    """
    for name, value in given.items():
        if value and not _as_list(getattr(options, name, None)):
            setattr(options, name, value)


def _check_load(options: Any) -> None:
    """Validate the load-model options; ConfigError naming the first bad one."""
    if options.trace and (options.request_rate or options.sweep_rates or options.sweep_users):
        raise ConfigError("--trace replays the trace's own timing: leave out --request-rate and the sweeps")
    for name in ("trace_start_s", "trace_duration_s", "trace_max_requests"):
        if getattr(options, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0 (0: no limit), got {getattr(options, name)}")
    if not options.trace_speedup > 0:
        raise ConfigError(f"--trace-speedup must be > 0, got {options.trace_speedup}")
    if options.request_rate < 0:
        raise ConfigError(f"--request-rate must be >= 0 requests/s (0: closed loop), got {options.request_rate}")
    if not options.burstiness > 0:
        raise ConfigError(f"--burstiness must be > 0, got {options.burstiness}")
    if options.request_rate and options.sweep_rates:
        raise ConfigError("--request-rate and --sweep-rates exclude each other: the sweep sets the rate of each step")
    if options.max_concurrency < 1:
        raise ConfigError(f"--max-concurrency must be >= 1, got {options.max_concurrency}")
    if options.max_requests < 0:
        raise ConfigError(f"--max-requests must be >= 0 (0: no limit), got {options.max_requests}")
    _check_search(options)
    if not 0 <= options.abort_error_rate <= 1:
        raise ConfigError(f"--abort-error-rate must be between 0 and 1, got {options.abort_error_rate}")


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


def _metrics_urls(options: Any) -> tuple[str, ...]:
    """The validated --metrics-url values; the --metrics-interval-s and --metrics-map they go with checked too."""
    urls = tuple(_as_list(getattr(options, "metrics_url", None)))
    for url in urls:
        if not url.lower().startswith(("http://", "https://")):
            raise ConfigError(
                f"--metrics-url {redact.redact(url)!r}: give an http(s) URL, e.g. http://127.0.0.1:8000/metrics"
            )
    if not options.metrics_interval_s > 0:
        raise ConfigError(f"--metrics-interval-s must be > 0, got {options.metrics_interval_s}")
    if options.metrics_map:
        load_maps(options.metrics_map)
    return urls


def _workload_and_provider(options: Any) -> dict[str, Any]:
    """The validated workload and provider settings; files (dataset, tokenizer, images) are loaded once here."""
    provider = options.provider
    if provider in ("azure", "databricks") and not options.deployment:
        what = "the Azure deployment" if provider == "azure" else "the Databricks serving-endpoint name"
        raise ConfigError(f"--provider {provider} needs --deployment NAME ({what})")
    family = server_family(options.server_family, provider)
    check_length_control(family, options.ignore_eos)
    if options.embedding_batch < 1:
        raise ConfigError(f"--embedding-batch must be >= 1, got {options.embedding_batch}")
    if options.prefix_tokens < 0:
        raise ConfigError(f"--prefix-tokens must be >= 0, got {options.prefix_tokens}")
    if options.prefix_pool < 1:
        raise ConfigError(f"--prefix-pool must be >= 1, got {options.prefix_pool}")
    if options.prefix_pool > 1 and not options.prefix_tokens:
        raise ConfigError(f"--prefix-pool {options.prefix_pool} needs --prefix-tokens T (the length of each prefix)")
    if not options.prefix_zipf >= 0:
        raise ConfigError(f"--prefix-zipf must be >= 0, got {options.prefix_zipf}")
    name = options.session_header
    if ":" in name or any(c.isspace() for c in name):
        raise ConfigError(f"--session-header {name!r}: expected a header name, without ':' or spaces")
    if options.tokenizer:
        token_counter(options.tokenizer)  # a bad file fails now, with its name
    if options.dataset:
        load_dataset(options.dataset, options.dataset_format)
        if options.sweep_prompt_tokens:
            raise ConfigError("--sweep-prompt-tokens and --dataset exclude each other: the dataset sets the prompts")
    images = tuple(_as_list(options.image))
    for path in images:
        file_data_url(path)
    headers = tuple(parse_header(text) for text in _as_list(options.header))
    if options.ca_bundle:
        check_ca_file(options.ca_bundle, "--ca-bundle")
    if options.client == "openai-sdk":
        _import_openai()
    return {
        "seed": _optional_int(options.seed, "--seed"),
        "prompt_tokens": parse_length(options.prompt_tokens, "--prompt-tokens"),
        "max_tokens": parse_length(options.max_tokens, "--max-tokens"),
        "server_family": family,
        "image": images,
        "image_size": parse_size(options.image_size) if options.image_size else None,
        "header": headers,
    }


def _import_openai() -> None:
    """Import the openai SDK now (~1 s), not while the first users start; ConfigError if it is missing."""
    try:
        import openai  # noqa: F401
    except ImportError:
        raise ConfigError("--client openai-sdk needs the openai package: pip install openai") from None


def _optional_int(value: Any, option: str) -> int | None:
    """An optional integer option (the web UI form sends text; '' means not given)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{option} must be a whole number, got {value!r}") from None


def _as_list(value: Any) -> list[str]:
    """A repeatable option's values, blank ones left out (the web UI form sends one string, one
    value per line, or a list with an empty string for a field left empty)."""
    if isinstance(value, str):
        return [line for line in value.splitlines() if line.strip()]
    return [item for item in value or [] if not isinstance(item, str) or item.strip()]


def _check_cancel(options: Any) -> None:
    """Raise ConfigError naming a cancellation option out of its range or missing its partner."""
    rate, tokens, after_ms = options.cancel_rate, options.cancel_after_tokens, options.cancel_after_ms
    if not 0 <= rate <= 1:
        raise ConfigError(f"--cancel-rate must be a fraction in [0, 1], e.g. 0.2, got {rate:g}")
    if tokens < 0 or after_ms < 0:
        raise ConfigError("--cancel-after-tokens and --cancel-after-ms must be >= 0")
    if tokens and after_ms:
        raise ConfigError("--cancel-after-tokens and --cancel-after-ms exclude each other: give one")
    if rate and not (tokens or after_ms):
        raise ConfigError("--cancel-rate needs --cancel-after-tokens N or --cancel-after-ms T (when to close)")
    if (tokens or after_ms) and not rate:
        raise ConfigError("--cancel-after-tokens / --cancel-after-ms need --cancel-rate P (the share to close)")
    if rate and options.client != "fast":
        raise ConfigError("--cancel-rate needs the fast client (--client fast): the openai-sdk client cannot cancel")


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


def _default_results_dir(csv_prefix: str | None) -> str:
    """The folder of Locust's --csv prefix if given, else results/<local date-time>."""
    if csv_prefix:
        return os.path.dirname(csv_prefix) or "."
    return os.path.join("results", time.strftime("%Y%m%d-%H%M%S"))
