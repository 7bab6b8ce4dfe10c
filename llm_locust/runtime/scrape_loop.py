"""The server scraper's clock: every --metrics-interval-s, scrape every URL concurrently, each in its own greenlet.

The scraping itself (`scrape.scraper.ServerScraper`) is plain blocking code; this module is its only gevent side.
"""

from __future__ import annotations

import time

import gevent

from llm_locust.scrape.scraper import ServerScraper


class ScrapeLoop:
    """Runs `scraper` in a background greenlet from construction until `stop()`."""

    def __init__(self, scraper: ServerScraper) -> None:
        self.scraper = scraper
        self._greenlet: gevent.Greenlet | None = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            started = time.monotonic()
            self.scrape_all()
            gevent.sleep(max(0.0, self.scraper.interval_s - (time.monotonic() - started)))

    def scrape_all(self) -> None:
        """Scrape every URL once (concurrently), writing a row per good scrape."""
        gevent.joinall([gevent.spawn(self.scraper.scrape_url, state) for state in self.scraper.urls])

    def stop(self) -> None:
        """Stop the periodic scrapes, take a last one (the counters at the end), close the files."""
        if self._greenlet is None:
            return
        self._greenlet.kill()
        self._greenlet = None
        self.scrape_all()
        self.scraper.close()
