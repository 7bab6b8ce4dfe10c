"""Master/local: the live export's wiring — the Prometheus endpoint (`--prometheus-port`) served by a gevent WSGI
server in this process, and the OTel push on the meter provider Locust set up (`--otel`) — fed with every delta the
process merges (`RunState`), sampled when scraped or collected.

The metrics themselves are `export/` (pure). At the end of a run the process waits for one more scrape, so that
the scraper's last sample holds the final numbers (`final_scrape`), and flushes the OTel provider.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import gevent
from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, make_wsgi_app

from llm_locust.errors import ConfigError
from llm_locust.export.live import LiveGauges, LiveMetrics
from llm_locust.export.prometheus import LiveCollector
from llm_locust.export.settings import ExportSettings
from llm_locust.metrics.histograms import Delta

if TYPE_CHECKING:
    from llm_locust.export.otlp import OtlpExport

logger = logging.getLogger("llm_locust")

FINAL_SCRAPE_WAIT_S = 30.0
"""At the end of a run that was scraped regularly, the longest wait for the scrape that reads the final numbers (s):
twice the last interval between two scrapes, at most this."""


class LiveExport:
    """The live export of one process's tests: `start_test` each test, `add` each merged delta. Serves Prometheus
    with `--prometheus-port`; pushes with OTel when `otel` (Locust's `--otel`)."""

    def __init__(self, settings: ExportSettings, otel: bool) -> None:
        self._live: LiveMetrics | None = None
        self._run = ""
        self._gauges: Callable[[], LiveGauges] | None = None
        self.collector = LiveCollector(self._current)
        self._server: WSGIServer | None = None
        self._otlp = _otlp_export(self._sample) if otel else None
        if settings.prometheus_port:
            self._serve(settings)

    def _serve(self, settings: ExportSettings) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        self._server = WSGIServer(
            (settings.prometheus_host, settings.prometheus_port), make_wsgi_app(registry), log=None
        )
        try:
            self._server.start()
        except OSError as e:
            raise ConfigError(
                f"--prometheus-port {settings.prometheus_port}: cannot listen on "
                f"{settings.prometheus_host}:{settings.prometheus_port} ({e.strerror or e})"
            ) from None
        logger.info("Prometheus metrics at http://%s:%d/metrics", settings.prometheus_host, self._server.server_port)

    def start_test(self, run: str, gauges: Callable[[], LiveGauges]) -> None:
        """A new test named `run`: counters and histograms from zero; `gauges()` samples the rest at each scrape."""
        self._live = LiveMetrics()
        self._run = run
        self._gauges = gauges

    def add(self, delta: Delta) -> None:
        """Count one delta merged into the run (each delta once)."""
        if self._live is not None:
            self._live.add(delta)
            if self._otlp is not None:
                self._otlp.add(delta, self._run)

    def _sample(self) -> LiveGauges | None:
        return None if self._gauges is None else self._gauges()

    def _current(self) -> tuple[LiveMetrics, LiveGauges] | None:
        gauges = self._sample()
        return None if self._live is None or gauges is None else (self._live, gauges)

    def final_scrape(self, wait_s: float = FINAL_SCRAPE_WAIT_S) -> None:
        """The run's numbers are final: if something scrapes the endpoint regularly, wait until it scrapes once more
        (at most twice its interval + 1 s, and `wait_s`), so that its last sample is the run's final one."""
        seen = self.collector.scrapes
        interval_s = self.collector.interval_s
        if interval_s is None:  # scraped never, or once (by hand): nothing to wait for
            return
        wait_s = min(wait_s, 2 * interval_s + 1)
        logger.info("waiting for the last Prometheus scrape (at most %.0f s)", wait_s)
        deadline = time.monotonic() + wait_s
        while self.collector.scrapes == seen and time.monotonic() < deadline:
            gevent.sleep(0.1)

    def close(self) -> None:
        """Stop serving; push what the OTel provider holds."""
        if self._server is not None:
            self._server.stop(timeout=1)
        if self._otlp is not None:
            from opentelemetry import metrics as otel_metrics

            flush = getattr(otel_metrics.get_meter_provider(), "force_flush", None)
            if flush is not None:
                flush()


def _otlp_export(gauges: Callable[[], LiveGauges | None]) -> OtlpExport | None:
    """The OTel instruments on the global meter provider (Locust's, with its exporters); None, said once, without
    the OpenTelemetry API."""
    try:
        from opentelemetry import metrics as otel_metrics

        from llm_locust.export.otlp import METER_NAME, OtlpExport
    except ImportError:
        logger.warning("--otel: the OpenTelemetry SDK is not installed, the LLM metrics are not pushed "
                       "(pip install 'llm-locust[otel]')")  # fmt: skip
        return None
    return OtlpExport(otel_metrics.get_meter(METER_NAME), gauges)
