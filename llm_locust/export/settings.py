"""The live export's settings (`ExportSettings`): where the Prometheus endpoint listens, its options declared on
their fields and validated from Locust's parsed options.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.option_values import between, build, option, optional_int


@dataclass(frozen=True)
class ExportSettings:
    """`--prometheus-port` (0: no endpoint) and `--prometheus-host`, the address it listens on."""

    prometheus_port: int = field(
        metadata=option(
            "Serve the run's LLM metrics (TTFT, ITL, TPOT, E2E histograms; requests, tokens, errors; in flight) at "
            "http://HOST:PORT/metrics while it runs, from the master or local runner (0: off)",
            0,
            startup_only=True,
            check=between(0, 65535, "a TCP port", "1-65535; 0: off"),
        )
    )
    prometheus_host: str = field(
        metadata=option(
            "Address the --prometheus-port endpoint listens on (0.0.0.0: every interface)",
            "127.0.0.1",
            startup_only=True,
        )
    )

    @classmethod
    def from_options(cls, options: Any) -> ExportSettings:
        """Validated from `options`; ConfigError naming the bad option."""
        port = optional_int(getattr(options, "prometheus_port", 0), "--prometheus-port") or 0
        host = (getattr(options, "prometheus_host", "") or "").strip()
        if not host:
            raise ConfigError("--prometheus-host must name an address to listen on, e.g. 127.0.0.1 or 0.0.0.0")
        return build(cls, options, prometheus_port=port, prometheus_host=host)
