"""Master/local: the live export's wiring — the Prometheus endpoint (`--prometheus-port`) served by a gevent WSGI
server in this process, fed with every delta the process merges (`RunState`), sampled when scraped.

The metrics themselves are `export/` (pure). At the end of a run the process waits for one more scrape, so that
the scraper's last sample holds the final numbers (`final_scrape`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent
from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, make_wsgi_app

from llm_locust.errors import ConfigError
from llm_locust.export.live import LiveGauges, LiveMetrics
from llm_locust.export.prometheus import LiveCollector
from llm_locust.export.settings import ExportSettings
from llm_locust.metrics.histograms import Delta

logger = logging.getLogger("llm_locust")

FINAL_SCRAPE_WAIT_S = 30.0
"""At the end of a run that was scraped regularly, the longest wait for the scrape that reads the final numbers (s):
twice the last interval between two scrapes, at most this."""


class LiveExport:
    """The live export of one process's tests: `start_test` each test, `add` each merged delta."""

    def __init__(self, settings: ExportSettings) -> None:
        self._live: LiveMetrics | None = None
        self._gauges: Callable[[], LiveGauges] | None = None
        self.collector = LiveCollector(self._current)
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

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return int(self._server.server_port)

    def start_test(self, gauges: Callable[[], LiveGauges]) -> None:
        """A new test: counters and histograms from zero; `gauges()` samples the rest at each scrape."""
        self._live = LiveMetrics()
        self._gauges = gauges

    def add(self, delta: Delta) -> None:
        """Count one delta merged into the run (each delta once)."""
        if self._live is not None:
            self._live.add(delta)

    def _current(self) -> tuple[LiveMetrics, LiveGauges] | None:
        if self._live is None or self._gauges is None:
            return None
        return self._live, self._gauges()

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
        """Stop serving."""
        self._server.stop(timeout=1)
