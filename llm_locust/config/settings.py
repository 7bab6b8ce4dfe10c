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

from llm_locust import redact
from llm_locust.errors import ConfigError
from llm_locust.load.arrivals import ARRIVAL_KINDS, ArrivalKind, Step, parse_number_list, sweep_steps
from llm_locust.metrics.slo import Slo, parse_slos
from llm_locust.scrape.server_maps import load_maps
from llm_locust.transport.ca_file import check_ca_file
from llm_locust.transport.proxy import proxy_urls
from llm_locust.workload.datasets import FORMATS as DATASET_FORMATS
from llm_locust.workload.datasets import load_dataset
from llm_locust.workload.input_images import file_data_url, parse_size
from llm_locust.workload.lengths import LengthDist, parse_length
from llm_locust.workload.providers import (
    API_KEY_ENV,
    FAMILIES,
    PROVIDERS,
    check_length_control,
    parse_header,
    server_family,
)
from llm_locust.workload.tokens import token_counter

DEFAULT_AZURE_API_VERSION = "2024-10-21"
CLIENTS = ("fast", "openai-sdk")
SECRET_OPTIONS = ("api_key", "header")
"""Options whose values are secrets: masked in the web UI's form, which shows them empty."""


def add_arguments(parser: Any) -> None:
    """Register llm-locust's options on Locust's argument parser (shown in its web UI form too)."""
    group = _WebUIGroup(parser.add_argument_group("llm-locust", "LLM endpoint, workload and results options"))
    group.add_argument(
        "--model", default="", help="Model name sent in each request (default: the first of GET /v1/models)"
    )
    group.add_argument(
        "--api-key-env",
        default="",
        help="Environment variable holding the API key (default: OPENAI_API_KEY; AZURE_OPENAI_API_KEY with "
        "--provider azure; DATABRICKS_TOKEN with --provider databricks); never printed",
    )
    group.add_argument(
        "--api-key",
        default="",
        is_secret="api_key" in SECRET_OPTIONS,
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
        "--first-token-timeout-s",
        type=float,
        default=300.0,
        help="Longest time allowed from sending a request to its first generated token, seconds",
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
    add_load_arguments(parser)
    group.add_argument(
        "--slo",
        action="append",
        default=None,  # not [] (also --image, --header): the web UI would parse a list field's text as integers
        help="Service-level objective METRIC_STAT_ms=VALUE, e.g. ttft_p90_ms=2000 (repeat, or comma-separate): "
        "goodput counts the requests meeting every one; the summary checks each against the run",
    )
    group.add_argument(
        "--interval-s",
        type=float,
        default=5.0,
        help="Width of one row of the LLM time series (llm_timeseries.csv), seconds",
    )
    add_workload_arguments(group)
    add_provider_arguments(group)
    add_server_metrics_arguments(parser)
    _add_gate_arguments(group)


# -- workload and provider options (prompts, output length, datasets, images, endpoint dialect) --------------------
def add_workload_arguments(group: Any) -> None:
    """Options that shape each request: lengths, prompts, files, images."""
    group.add_argument(
        "--prompt-tokens",
        default="128",
        help="Synthetic prompt length in tokens: N, uniform:MIN,MAX, normal:MEAN,SD[,MIN,MAX], "
        "lognormal:MEAN,SD[,MIN,MAX]",
    )
    group.add_argument("--max-tokens", default="128", help="max_tokens of each request: N or a distribution")
    group.add_argument(
        "--ignore-eos",
        action="store_true",
        default=False,
        help="Make every output exactly max_tokens long with the fields of --server-family (vLLM/SGLang: "
        "ignore_eos + min_tokens; llama.cpp: ignore_eos + n_predict)",
    )
    group.add_argument(
        "--seed", type=int, default=None, help="Seed of prompts, lengths and arrival times (default: random)"
    )
    group.add_argument(
        "--prefix-tokens", type=int, default=0, help="Shared prefix in front of every synthetic prompt, in tokens"
    )
    group.add_argument(
        "--tokenizer", default="", help="Local tokenizer.json (Hugging Face tokenizers) to count prompt tokens exactly"
    )
    group.add_argument("--dataset", default="", help="Prompt file: .jsonl, .json (ShareGPT conversations) or .csv")
    group.add_argument(
        "--dataset-format",
        default="",
        choices=("", *DATASET_FORMATS),
        metavar="{" + ",".join(DATASET_FORMATS) + "}",
        help="Format of --dataset (default: from its extension)",
    )
    group.add_argument(
        "--image", action="append", default=None, help="Image file attached to every chat request (repeatable)"
    )
    group.add_argument("--image-size", default="", help="Attach a generated WIDTHxHEIGHT PNG to every chat request")


def add_provider_arguments(group: Any) -> None:
    """Options that say how to talk to the endpoint: provider, paths, auth, server family, client."""
    group.add_argument(
        "--provider", default="openai-compatible", choices=PROVIDERS, help="Request paths and auth of the endpoint"
    )
    group.add_argument("--deployment", default="", help="Azure deployment, or Databricks serving-endpoint name")
    group.add_argument("--api-version", default=DEFAULT_AZURE_API_VERSION, help="Azure OpenAI api-version")
    group.add_argument(
        "--server-family",
        default="",
        choices=("", *FAMILIES),
        metavar="{" + ",".join(FAMILIES) + "}",
        help="Server software: which fields --ignore-eos sends, llamacpp: a connection per request "
        "(default: vllm; openai for hosted providers)",
    )
    group.add_argument(
        "--header",
        action="append",
        default=None,
        is_secret="header" in SECRET_OPTIONS,
        help="Extra HTTP header 'Name: value' on every request (repeatable; values never printed)",
    )
    group.add_argument(
        "--ca-bundle",
        default="",
        help="PEM file of CA certificates trusted besides the system's (SSL_CERT_FILE, SSL_CERT_DIR and "
        "REQUESTS_CA_BUNDLE are honoured too)",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        default=False,
        help="Do not verify the server's TLS certificate and host name (the API key goes to whoever answers)",
    )
    group.add_argument(
        "--client",
        default="fast",
        choices=CLIENTS,
        help="fast (default; timestamps every event on arrival) or openai-sdk (the openai package, max_retries=0)",
    )


def add_load_arguments(parser: Any) -> None:
    """The load-model options: open-loop request rate, sweeps, limits."""
    group = _WebUIGroup(parser.add_argument_group("llm-locust load", "Open-loop request rate, sweeps and limits"))
    group.add_argument(
        "--request-rate",
        type=float,
        default=0.0,
        help="Open loop: send R requests/s in total, split across all workers (0: closed loop, each user "
        "sends its next request when the last ended); -u is then only the cap on requests in flight",
    )
    group.add_argument(
        "--arrival",
        choices=ARRIVAL_KINDS,
        default="poisson",
        help="Arrival process of --request-rate / --sweep-rates: poisson (default), constant, gamma",
    )
    group.add_argument(
        "--burstiness",
        type=float,
        default=1.0,
        help="Gamma arrivals' shape: 1 = Poisson, < 1 burstier, > 1 more regular (default 1)",
    )
    group.add_argument(
        "--sweep-users", default="", help="Concurrency sweep, e.g. 1,2,4,8,16 (needs -f locustfiles/sweep.py)"
    )
    group.add_argument(
        "--sweep-rates", default="", help="Request-rate sweep in req/s, e.g. 1,2,4,8 (needs -f locustfiles/sweep.py)"
    )
    group.add_argument("--step-duration-s", type=float, default=30.0, help="Length of each sweep step, seconds")
    group.add_argument(
        "--warmup-s",
        type=float,
        default=5.0,
        help="Start of each sweep step left out of its metrics, seconds (default 5)",
    )
    group.add_argument(
        "--max-concurrency",
        type=int,
        default=256,
        help="Rate sweep: users per step, the cap on requests in flight (default 256)",
    )
    group.add_argument(
        "--max-requests",
        type=int,
        default=0,
        help="End the run after this many requests in total across workers (0: no limit)",
    )
    group.add_argument(
        "--abort-error-rate",
        type=float,
        default=0.0,
        help="End the run early once more than this share of requests failed (e.g. 0.5; checked "
        "after 20 requests; 0: never)",
    )


def add_server_metrics_arguments(parser: Any) -> None:
    """The server-metrics options: Prometheus URLs scraped during the run (`llm_locust.scrape.scraper`)."""
    group = _WebUIGroup(
        parser.add_argument_group("llm-locust server metrics", "Scrape the server's Prometheus metrics")
    )
    group.add_argument(
        "--metrics-url",
        action="append",
        default=None,
        help="Prometheus metrics URL of the server, e.g. http://127.0.0.1:8000/metrics (repeat for several), "
        "scraped by the master during the run into server_metrics.csv; a DCGM-exporter or node-exporter URL "
        "(GPU / host telemetry) goes to telemetry.csv",
    )
    group.add_argument(
        "--metrics-interval-s", type=float, default=2.0, help="Time between two scrapes of each --metrics-url, seconds"
    )
    group.add_argument(
        "--metrics-map",
        default="",
        help='JSON file naming the metrics of other servers, e.g. {"myserver": {"running": "my_running"}} '
        "(built in: vllm, sglang, tgi, llamacpp)",
    )


def _add_gate_arguments(group: Any) -> None:
    """Pass/fail gates and drift windows (llm_locust.metrics.gates, llm_locust.metrics.drift)."""
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
    step_duration_s: float = 30.0
    warmup_s: float = 5.0
    max_concurrency: int = 256
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
    tokenizer: str = ""
    dataset: str = ""
    dataset_format: str = ""
    image: tuple[str, ...] = ()
    image_size: tuple[int, int] | None = None
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
        )

    @property
    def load_model(self) -> str:
        """concurrency, rate, concurrency_sweep or rate_sweep."""
        if self.sweep_users:
            return "concurrency_sweep"
        if self.sweep_rates:
            return "rate_sweep"
        return "rate" if self.request_rate else "concurrency"

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
    for url in (getattr(options, "host", None), *_as_list(getattr(options, "metrics_url", None)), *proxy_urls()):
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
    if not 0 <= options.abort_error_rate <= 1:
        raise ConfigError(f"--abort-error-rate must be between 0 and 1, got {options.abort_error_rate}")


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
    if options.prefix_tokens < 0:
        raise ConfigError(f"--prefix-tokens must be >= 0, got {options.prefix_tokens}")
    if options.tokenizer:
        token_counter(options.tokenizer)  # a bad file fails now, with its name
    if options.dataset:
        load_dataset(options.dataset, options.dataset_format)
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


def check_host(host: str | None) -> None:
    """Raise ConfigError unless `host` (Locust's --host) is empty or an http(s) URL with an address."""
    if not host:
        return  # given later (web UI form) or on the master
    scheme, sep, rest = host.partition("://")
    example = "e.g. --host http://127.0.0.1:8000"
    if not sep:
        raise ConfigError(f"--host {host!r} has no URL scheme: start it with http:// or https://, {example}")
    if scheme.lower() not in ("http", "https"):
        raise ConfigError(f"--host {host!r}: unknown URL scheme {scheme!r}; use http:// or https://, {example}")
    if not rest.split("/", 1)[0].rpartition("@")[2]:
        raise ConfigError(f"--host {host!r} names no server address, {example}")


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
