"""Which Prometheus metric of an inference server means what: built-in maps and --metrics-map files.

A map names, for each standard column, the metric(s) that hold it (the first one present is
used). Columns:

- gauges: `running` (requests in the running batch), `waiting` (requests queued),
  `kv_cache_usage` (0..1);
- token counters: `prompt_tokens`, `generation_tokens` (a counter, or a histogram whose _sum
  counts tokens, as TGI's);
- prefix-cache counters, in tokens: `prefix_cache_queries` (prompt tokens looked up), `prefix_cache_hits` (of
  those, found in the cache): the server's hit rate over the run;
- latency histograms in seconds: `ttft`, `tpot`, `e2e`, `queue_time`;
- LoRA adapters: `lora_running_adapters`, `lora_waiting_adapters` (distinct adapters of the running / waiting
  requests).

A candidate is a metric name, or `name{label}` for an info gauge whose labels carry the value: the series with the
largest value (vLLM sets each to the time it was last seen: the latest) is read, and the column is the number of
comma-separated names in its `label` (vLLM's `vllm:lora_requests_info{running_lora_adapters}`).

A server's family is detected from the names present in its first good scrape: the map with the
most columns present wins (a --metrics-map file's maps first on a tie). A page no map matches
may be a GPU or host exporter (`llm_locust.scrape.hardware`).

Where the built-in names come from (each checked against the server's own source):

- vLLM: vllm/v1/metrics/loggers.py (`vllm:kv_cache_usage_perc`; `vllm:gpu_cache_usage_perc` is
  the older name; counters `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits`, exported with `_total`, in
  tokens; `vllm:gpu_prefix_cache_queries` / `_hits` are their deprecated names;
  `vllm:inter_token_latency_seconds` is used when a version exports no
  `vllm:time_per_output_token_seconds`); its LoRA gauge `vllm:lora_requests_info` (labels `max_lora`,
  `waiting_lora_adapters`, `running_lora_adapters`; value: when the combination was last set), exported only when
  serving LoRA adapters.
- SGLang: python/sglang/srt/metrics/collector.py (gauges `sglang:num_running_reqs`,
  `sglang:num_queue_reqs`, `sglang:token_usage`; counters `sglang:prompt_tokens_total`,
  `sglang:generation_tokens_total`; histograms `sglang:time_to_first_token_seconds`,
  `sglang:inter_token_latency_seconds` (older releases: `sglang:time_per_output_token_seconds`),
  `sglang:e2e_request_latency_seconds`, `sglang:queue_time_seconds`).
- TGI: router/src/server.rs's `metrics::describe_*` list and router/src/infer, validation.rs
  (TGI 2.x/3.x): gauges `tgi_batch_current_size`, `tgi_queue_size`; histograms in seconds
  `tgi_request_duration`, `tgi_request_queue_duration`, `tgi_request_mean_time_per_token_duration`;
  token-count histograms `tgi_request_input_length` (recorded at validation) and
  `tgi_request_generated_tokens` (successful requests). TGI exports no TTFT histogram and no
  KV-cache gauge.
- llama.cpp: tools/server (server.cpp, later server-context.cpp; before: examples/server/server.cpp)
  `/metrics` handler: counters `llamacpp:prompt_tokens_total`, `llamacpp:tokens_predicted_total`,
  gauges `llamacpp:requests_processing`, `llamacpp:requests_deferred`. `llamacpp:kv_cache_usage_ratio`
  exists only in older builds (current ones export no KV-cache gauge); no latency histograms.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from llm_locust.errors import ConfigError

GAUGES = ("running", "waiting", "kv_cache_usage")
TOKEN_COUNTERS = ("prompt_tokens", "generation_tokens")
PREFIX_COUNTERS = ("prefix_cache_queries", "prefix_cache_hits")
COUNTERS = TOKEN_COUNTERS + PREFIX_COUNTERS
HISTOGRAMS = ("ttft", "tpot", "e2e", "queue_time")
LORA_GAUGES = ("lora_running_adapters", "lora_waiting_adapters")
COLUMNS = GAUGES + COUNTERS + HISTOGRAMS + LORA_GAUGES

HISTOGRAM_FIELDS = ("count", "mean_ms", "p50_ms", "p90_ms")
SERVER_COLUMNS = (
    "time",
    "elapsed_s",
    "url",
    "family",
    *GAUGES,
    "prompt_tokens_total",
    "generation_tokens_total",
    "generation_tokens_per_s",
    *(f"{h}_{f}" for h in HISTOGRAMS for f in HISTOGRAM_FIELDS),
    *LORA_GAUGES,
)
"""Columns of server_metrics.csv; a value the server does not export is left empty."""

NameMap = dict[str, tuple[str, ...]]
"""Column → candidate metric names (Prometheus family names; a counter's `_total` optional)."""

BUILTIN_MAPS: dict[str, NameMap] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "tpot": ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "queue_time": ("vllm:request_queue_time_seconds",),
        "lora_running_adapters": ("vllm:lora_requests_info{running_lora_adapters}",),
        "lora_waiting_adapters": ("vllm:lora_requests_info{waiting_lora_adapters}",),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "tpot": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": ("sglang:e2e_request_latency_seconds",),
        "queue_time": ("sglang:queue_time_seconds",),
    },
    "tgi": {
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
        "prompt_tokens": ("tgi_request_input_length",),
        "generation_tokens": ("tgi_request_generated_tokens",),
        "tpot": ("tgi_request_mean_time_per_token_duration",),
        "e2e": ("tgi_request_duration",),
        "queue_time": ("tgi_request_queue_duration",),
    },
    "llamacpp": {
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
    },
}


def family_name(metric: str) -> str:
    """The name prometheus-client's parser gives the family of `metric` (a counter loses `_total`; a label selector,
    `name{label}`, is dropped)."""
    return split_label(metric)[0].removesuffix("_total")


def split_label(metric: str) -> tuple[str, str]:
    """(name, label) of a map's candidate `name{label}`; (name, "") for a plain name."""
    name, _, label = metric.partition("{")
    return name, label.removesuffix("}")


def load_maps(path: str) -> dict[str, NameMap]:
    """The maps of a --metrics-map JSON file: {"family": {"column": "metric" | ["metric", ...]}};
    ConfigError naming the file and the bad entry."""
    where = f"--metrics-map {path}"
    try:
        document = orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise ConfigError(f"{where}: cannot read the file ({e.strerror})") from None
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(document, dict) or not document:
        raise ConfigError(f'{where}: expected a JSON object like {{"myserver": {{"running": "my_running"}}}}')
    maps: dict[str, NameMap] = {}
    for family, columns in document.items():
        if not isinstance(columns, dict) or not columns:
            raise ConfigError(f"{where}: family {family!r} must map columns to metric names")
        maps[family] = {}
        for column, names in columns.items():
            if column not in COLUMNS:
                raise ConfigError(
                    f"{where}: family {family!r}: unknown column {column!r}; use one of {', '.join(COLUMNS)}"
                )
            names = [names] if isinstance(names, str) else names
            if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(
                    f"{where}: family {family!r}, column {column!r}: give a metric name or a list of names"
                )
            maps[family][column] = tuple(names)
    return maps


def all_maps(custom: dict[str, NameMap] | None = None) -> dict[str, NameMap]:
    """The maps to detect from: `custom` (a --metrics-map file's) first, then the built-in ones."""
    return {**(custom or {}), **{k: v for k, v in BUILTIN_MAPS.items() if k not in (custom or {})}}


def detect(names: set[str], maps: dict[str, NameMap]) -> str | None:
    """The family whose map has the most columns among the family `names` present; None if none."""
    best, best_score = None, 0
    for family, columns in maps.items():
        score = sum(any(family_name(m) in names for m in metrics) for metrics in columns.values())
        if score > best_score:
            best, best_score = family, score
    return best
