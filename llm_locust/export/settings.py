"""The live export's settings (`ExportSettings`): where the Prometheus endpoint listens, validated from Locust's parsed
options.

Pure: `config.settings` assembles it with the other stages' settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_locust.errors import ConfigError
from llm_locust.option_values import build, optional_int


@dataclass(frozen=True)
class ExportSettings:
    """`--prometheus-port` (0: no endpoint) and `--prometheus-host`, the address it listens on."""

    prometheus_port: int
    prometheus_host: str

    @classmethod
    def from_options(cls, options: Any) -> ExportSettings:
        """Validated from `options`; ConfigError naming the bad option."""
        port = optional_int(getattr(options, "prometheus_port", 0), "--prometheus-port") or 0
        if not 0 <= port <= 65535:
            raise ConfigError(f"--prometheus-port must be a TCP port (1-65535; 0: off), got {port}")
        host = (getattr(options, "prometheus_host", "") or "").strip()
        if not host:
            raise ConfigError("--prometheus-host must name an address to listen on, e.g. 127.0.0.1 or 0.0.0.0")
        return build(cls, options, prometheus_port=port, prometheus_host=host)
