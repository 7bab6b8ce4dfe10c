"""The scraper's settings (`ScrapeSettings`): the server's Prometheus endpoints to scrape, how often, and the
name map, validated from Locust's parsed options.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust import redact
from llm_locust.errors import ConfigError
from llm_locust.option_values import as_list, build, shown_as
from llm_locust.scrape.server_maps import load_maps


@dataclass(frozen=True)
class ScrapeSettings:
    """`--metrics-url` endpoints (none: no scraping; credentials redacted in results), the interval between scrapes
    (s) and the `--metrics-map` file ("": the built-in maps)."""

    metrics_url: tuple[str, ...] = field(metadata=shown_as(lambda urls: [redact.redact(url) for url in urls]))
    metrics_interval_s: float
    metrics_map: str

    @classmethod
    def from_options(cls, options: Any) -> ScrapeSettings:
        """Validated from `options` (the map file read); ConfigError naming the bad option."""
        urls = tuple(as_list(getattr(options, "metrics_url", None)))
        for url in urls:
            if not url.lower().startswith(("http://", "https://")):
                raise ConfigError(
                    f"--metrics-url {redact.redact(url)!r}: give an http(s) URL, e.g. http://127.0.0.1:8000/metrics"
                )
        if not options.metrics_interval_s > 0:
            raise ConfigError(f"--metrics-interval-s must be > 0, got {options.metrics_interval_s}")
        if options.metrics_map:
            load_maps(options.metrics_map)
        return build(cls, options, metrics_url=urls)
