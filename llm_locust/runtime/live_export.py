"""Master/local: the live export's wiring — the Prometheus endpoint (`--prometheus-port`) served by a gevent WSGI
server in this process, and the OTel push (`--otel`: the SDK's exporters, in gevent's thread pool) — fed with every
delta the process merges (`lead.Lead`), sampled when scraped or pushed.

The metrics themselves are `export/` (pure). At the end of a run the process waits for one more scrape, so that
the scraper's last sample holds the final numbers (`final_scrape`), and pushes them once more (`close`).
"""

from __future__ import annotations

import logging
import os
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
from llm_locust.metrics.recorder import Delta
from llm_locust.runtime.runner_ops import wait_until

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter

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
        self._start_ns = time.time_ns()
        self._server: WSGIServer | None = None
        if settings.prometheus_port:
            self._serve(settings)
        self._exporters: list[MetricExporter] = _otel_exporters() if otel else []
        self._pusher = gevent.spawn(self._push_forever) if self._exporters else None

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
        self._start_ns = time.time_ns()

    def add(self, delta: Delta) -> None:
        """Count one delta merged into the run (each delta once)."""
        if self._live is not None:
            self._live.add(delta)

    def _current(self) -> tuple[LiveMetrics, LiveGauges] | None:
        if self._live is None or self._gauges is None:
            return None
        return self._live, self._gauges()

    def _push_forever(self) -> None:
        from llm_locust.export.otlp import export_interval_s

        while True:
            gevent.sleep(export_interval_s())
            self._push()

    def _push(self) -> None:
        """Hand the current numbers to each OTel exporter (in gevent's thread pool: an exporter's I/O, gRPC's
        included, never blocks this process's loop)."""
        current = self._current()
        if current is None:
            return
        from opentelemetry.sdk.resources import Resource

        from llm_locust.export.otlp import metrics_data

        resource = Resource.create({"service.name": os.getenv("OTEL_SERVICE_NAME", "locust")})
        data = metrics_data(*current, self._start_ns, time.time_ns(), resource)
        for exporter in self._exporters:
            try:
                gevent.get_hub().threadpool.apply(exporter.export, (data,))
            except Exception as e:  # a collector down must not end the run
                logger.warning("--otel: the LLM metrics could not be pushed: %s", e)

    def final_scrape(self, wait_s: float = FINAL_SCRAPE_WAIT_S) -> None:
        """The run's numbers are final: if something scrapes the endpoint regularly, wait until it scrapes once more
        (at most twice its interval + 1 s, and `wait_s`), so that its last sample is the run's final one."""
        seen = self.collector.scrapes
        interval_s = self.collector.interval_s
        if interval_s is None:  # scraped never, or once (by hand): nothing to wait for
            return
        wait_s = min(wait_s, 2 * interval_s + 1)
        logger.info("waiting for the last Prometheus scrape (at most %.0f s)", wait_s)
        wait_until(lambda: self.collector.scrapes != seen, wait_s, look_s=0.1)

    def close(self) -> None:
        """Stop serving; push the final numbers."""
        if self._server is not None:
            self._server.stop(timeout=1)
        if self._pusher is not None:
            self._pusher.kill()
            self._push()
            for exporter in self._exporters:
                exporter.shutdown()


def _otel_exporters() -> list[MetricExporter]:
    """The OTel SDK's exporters named by the OTEL_* variables (`export.otlp.exporters_from_environment`); none, said
    once, without the SDK."""
    try:
        from llm_locust.export.otlp import exporters_from_environment
    except ImportError:
        logger.warning("--otel: the OpenTelemetry SDK is not installed, the LLM metrics are not pushed "
                       "(pip install 'llm-locust[otel]')")  # fmt: skip
        return []
    return exporters_from_environment()
