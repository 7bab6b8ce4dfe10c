"""The scraper's settings (`ScrapeSettings`): the server's Prometheus endpoints to scrape, how often, and the
name map, validated from Locust's parsed options; each option declared on its field.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust import redact
from llm_locust.errors import ConfigError
from llm_locust.option_values import above, as_list, build, option, shown_as
from llm_locust.scrape.server_maps import load_maps


@dataclass(frozen=True)
class ScrapeSettings:
    """`--metrics-url` endpoints (none: no scraping; credentials redacted in results), the interval between scrapes
    (s) and the `--metrics-map` file ("": the built-in maps)."""

    metrics_url: tuple[str, ...] = field(
        metadata=option(
            "Prometheus metrics URL of the server, e.g. http://127.0.0.1:8000/metrics (repeat for several), scraped "
            "by the master during the run into server_metrics.csv; a DCGM-exporter or node-exporter URL (GPU / host "
            "telemetry) goes to telemetry.csv",
            None,
            repeat=True,
            startup_only=True,
        )
        | shown_as(lambda urls: [redact.redact(url) for url in urls])
    )
    metrics_interval_s: float = field(
        metadata=option("Time between two scrapes of each --metrics-url, seconds", 2.0, check=above(0))
    )
    metrics_map: str = field(
        metadata=option(
            'JSON file naming the metrics of other servers, e.g. {"myserver": {"running": "my_running"}} (built in: '
            "vllm, sglang, tgi, llamacpp)",
            startup_only=True,
        )
    )

    @classmethod
    def from_options(cls, options: Any) -> ScrapeSettings:
        """Validated from `options` (the map file read); ConfigError naming the bad option."""
        urls = tuple(as_list(getattr(options, "metrics_url", None)))
        for url in urls:
            if not url.lower().startswith(("http://", "https://")):
                raise ConfigError(
                    f"--metrics-url {redact.redact(url)!r}: give an http(s) URL, e.g. http://127.0.0.1:8000/metrics"
                )
        if options.metrics_map:
            load_maps(options.metrics_map)
        return build(cls, options, metrics_url=urls)
