"""The server's perspective: scrape Prometheus metrics URLs during the run (master / local only).

`ServerScraper` fetches every --metrics-url each --metrics-interval-s (driven by `runtime.scrape_loop`), parses
the text with prometheus-client's parser, maps the names to standard columns (`server_maps`) and
appends one row per URL and scrape to server_metrics.csv (flushed as it goes): the gauges as
read, the token counters as read (cumulative), and per latency histogram the mean / p50 / p90
of the observations made since the previous scrape of that URL. A failed scrape (no answer,
an error status, text that does not parse, no known metric name) is counted, its error kept
and logged once per URL: it never stops the run. `summary()` is summary.json's "server".

A URL that is no inference server but a DCGM-exporter or node-exporter (`hardware`) is
scraped the same way; its values go to telemetry.csv (opened at the first such scrape) and
`telemetry_summary()` is summary.json's "telemetry".

URLs are written redacted (a password in the URL never reaches a file or a log).
"""

from __future__ import annotations

import base64
import csv
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from llm_locust import redact
from llm_locust.metrics.vocabulary import SERVER_METRICS_FILE, TELEMETRY_FILE
from llm_locust.scrape import hardware
from llm_locust.scrape.hardware import TELEMETRY_COLUMNS, TelemetrySeries, Triple
from llm_locust.scrape.prometheus import Hist, Sample, extract, parse
from llm_locust.scrape.server_maps import (
    COUNTERS,
    GAUGES,
    HISTOGRAM_FIELDS,
    HISTOGRAMS,
    LORA_GAUGES,
    SERVER_COLUMNS,
    TOKEN_COUNTERS,
    NameMap,
    all_maps,
    load_maps,
)
from llm_locust.scrape.settings import ScrapeSettings

logger = logging.getLogger("llm_locust")

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_TIMEOUT_S = 5.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect (a --metrics-url's credentials would go where the answer points): a 3xx is a failed
    scrape."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class UrlState:
    """What one URL gave so far: counts, last error, first / previous sample, peaks and means."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown_url = redact.redact(url)
        self.family: str | None = None
        self.names: NameMap | None = None
        self.ok = 0
        self.failed = 0
        self.last_error: str | None = None
        self.first: Sample | None = None
        self.last: Sample | None = None
        self.peaks: dict[str, float] = {}
        self.kv_usage_sum = 0.0
        self.kv_usage_n = 0
        self.telemetry: TelemetrySeries | None = None

    def fail(self, error: str) -> None:
        """Count a failed scrape; log the first failure of this URL."""
        self.failed += 1
        self.last_error = redact.redact(error)
        if self.failed == 1:
            logger.warning("server metrics %s: scrape failed: %s (the run goes on)", self.shown_url, self.last_error)

    def scrapes(self) -> dict[str, Any]:
        """The URL (redacted), its family and how its scrapes went."""
        return {
            "url": self.shown_url,
            "family": self.family,
            "scrapes_ok": self.ok,
            "scrapes_failed": self.failed,
            "last_error": self.last_error,
        }

    def summary(self) -> dict[str, Any]:
        """This URL's entry of summary.json's "server": token counts over the run (first to last
        good scrape), peaks, mean KV-cache usage (0..1), the prefix cache's hit rate (0..1: hit / queried
        tokens over the run; None without those counters), latency means in ms over the run."""
        first, last = self.first, self.last
        span_s = (last.epoch_s - first.epoch_s) if first and last else 0.0
        entry: dict[str, Any] = {**self.scrapes(), "span_s": round(span_s, 3)}
        for column in COUNTERS:
            delta = _counter_delta(first, last, column)
            entry[column] = delta
            if column in TOKEN_COUNTERS:
                entry[f"{column}_per_s"] = round(delta / span_s, 3) if delta is not None and span_s > 0 else None
        queries, hits = entry["prefix_cache_queries"], entry["prefix_cache_hits"]
        entry["prefix_cache_hit_rate"] = round(hits / queries, 4) if queries and hits is not None else None
        entry["running_max"] = self.peaks.get("running")
        entry["waiting_max"] = self.peaks.get("waiting")
        for column in LORA_GAUGES:
            entry[f"{column}_max"] = self.peaks.get(column)
        entry["kv_cache_usage_mean"] = round(self.kv_usage_sum / self.kv_usage_n, 4) if self.kv_usage_n else None
        for column in HISTOGRAMS:
            hist = last.hists.get(column) if last else None
            run = hist.minus(first.hists.get(column)) if hist is not None and first is not None else None
            entry[f"{column}_count"] = round(run.count) if run is not None else None
            mean = run.mean_ms() if run is not None else None
            entry[f"{column}_mean_ms"] = round(mean, 3) if mean is not None else None
        return entry


def _request(url: str) -> urllib.request.Request:
    """A GET of `url`; credentials in it (`http://user:password@host/metrics`, percent-decoded as the request's
    transport decodes --host's) sent as Basic auth."""
    parts = urlsplit(url)
    if parts.username is None:
        return urllib.request.Request(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{parts.port}" if parts.port else ""
    plain = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
    return urllib.request.Request(plain, headers={"Authorization": f"Basic {token}"})


def _counter_delta(first: Sample | None, last: Sample | None, column: str) -> float | None:
    if first is None or last is None or column not in last.values or column not in first.values:
        return None
    delta = last.values[column] - first.values[column]
    return delta if delta >= 0 else last.values[column]  # a restarted server counts from 0


class ServerScraper:
    """Scrapes `urls` every `interval_s` into `results_dir`/server_metrics.csv until `stop()`."""

    def __init__(
        self, results_dir: Path, urls: tuple[str, ...], interval_s: float, maps: dict[str, NameMap], t_start_s: float
    ) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        self.path = results_dir / SERVER_METRICS_FILE
        self.interval_s = interval_s
        self.timeout_s = min(interval_s, MAX_TIMEOUT_S)
        self.maps = maps
        self.t_start_s = t_start_s
        self.urls = [UrlState(url) for url in urls]
        self.rows = 0
        self._file = self.path.open("w", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(SERVER_COLUMNS)
        self._file.flush()
        self.telemetry_path = results_dir / TELEMETRY_FILE
        self.telemetry_rows = 0
        self._telemetry_file: Any = None
        self._telemetry_csv: Any = None

    def close(self) -> None:
        """Close the files (a scrape that ends later writes nothing)."""
        self._file.close()
        if self._telemetry_file is not None:
            self._telemetry_file.close()

    def scrape_url(self, state: UrlState) -> None:
        """Scrape `state`'s URL once (blocking I/O): a row per good scrape, a counted failure otherwise."""
        epoch_s = time.time()
        try:
            with _OPENER.open(_request(state.url), timeout=self.timeout_s) as response:
                text = response.read(MAX_BODY_BYTES).decode("utf-8", "replace")
            family, families = parse(text, state.names, self.maps)
            if state.names is None and state.telemetry is None:
                _identify(state, family, families, self.maps)
            if state.telemetry is not None:
                triples = state.telemetry.read(families, epoch_s)
            else:
                sample = extract(families, state.names or {}, epoch_s)
        except Exception as e:  # any failure is recorded, never fatal
            state.fail(f"{type(e).__name__}: {e}")
            return
        if self._file.closed:
            return
        if state.telemetry is not None:
            self._record_telemetry(state, epoch_s, triples)
        else:
            self._record(state, sample)

    def _record_telemetry(self, state: UrlState, epoch_s: float, triples: list[Triple]) -> None:
        """Append one row per (device, metric) of a telemetry scrape to telemetry.csv."""
        state.ok += 1
        if self._telemetry_file is None:
            self._telemetry_file = self.telemetry_path.open("w", newline="")
            self._telemetry_csv = csv.writer(self._telemetry_file)
            self._telemetry_csv.writerow(TELEMETRY_COLUMNS)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch_s))
        elapsed_s = round(epoch_s - self.t_start_s, 3)
        for device, metric, value in triples:
            self._telemetry_csv.writerow((stamp, elapsed_s, state.shown_url, state.family, device, metric,
                                          round(value, 4)))  # fmt: skip
        self._telemetry_file.flush()
        self.telemetry_rows += len(triples)

    def _record(self, state: UrlState, sample: Sample) -> None:
        previous = state.last
        state.ok += 1
        state.first = state.first or sample
        state.last = sample
        for column in ("running", "waiting", *LORA_GAUGES):
            if column in sample.values:
                state.peaks[column] = max(state.peaks.get(column, 0.0), sample.values[column])
        if "kv_cache_usage" in sample.values:
            state.kv_usage_sum += sample.values["kv_cache_usage"]
            state.kv_usage_n += 1
        row: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(sample.epoch_s)),
            "elapsed_s": round(sample.epoch_s - self.t_start_s, 3),
            "url": state.shown_url,
            "family": state.family,
            **{column: sample.values.get(column, "") for column in GAUGES},
            "prompt_tokens_total": sample.values.get("prompt_tokens", ""),
            "generation_tokens_total": sample.values.get("generation_tokens", ""),
            "generation_tokens_per_s": _rate(previous, sample, "generation_tokens"),
        }
        for column in HISTOGRAMS:
            hist = sample.hists.get(column)
            interval = hist.minus(previous.hists.get(column)) if hist is not None and previous is not None else None
            for name, value in zip(HISTOGRAM_FIELDS, _hist_fields(interval), strict=True):
                row[f"{column}_{name}"] = value
        row.update({column: sample.values.get(column, "") for column in LORA_GAUGES})
        self._csv.writerow(row[column] for column in SERVER_COLUMNS)
        self._file.flush()
        self.rows += 1

    def summary(self) -> dict[str, Any]:
        """summary.json's "server": the file, the interval and one entry per URL (telemetry ones apart)."""
        return {
            "file": self.path.name,
            "interval_s": self.interval_s,
            "rows": self.rows,
            "urls": [state.summary() for state in self.urls if state.telemetry is None],
        }

    def telemetry_summary(self) -> dict[str, Any] | None:
        """summary.json's "telemetry": per DCGM- or node-exporter URL its scrapes, devices and the
        mean / p50 / max of each aggregate metric (`hardware.TelemetrySeries.summary`); None
        when no URL was one."""
        urls = [state for state in self.urls if state.telemetry is not None]
        if not urls:
            return None
        return {
            "file": self.telemetry_path.name,
            "interval_s": self.interval_s,
            "rows": self.telemetry_rows,
            "urls": [{**s.scrapes(), **s.telemetry.summary()} for s in urls if s.telemetry is not None],
        }

    def power_samples(self) -> tuple[hardware.PowerSamples, ...]:
        """Per DCGM-exporter URL that gave power, its (epoch s, W summed over the GPUs) samples so far."""
        series = [state.telemetry for state in self.urls if state.telemetry is not None]
        return tuple(tuple(s.power) for s in series if s.power)

    def warnings(self) -> list[str]:
        """One line per URL with failed scrapes (count and last error)."""
        return [
            f"server metrics {s.shown_url}: {s.failed} of {s.ok + s.failed} scrapes failed; last error: {s.last_error}"
            for s in self.urls
            if s.failed
        ]


def _identify(state: UrlState, family: str | None, families: dict[str, Any], maps: dict[str, NameMap]) -> None:
    """Set the family of `state` from its first good page: an inference server's map, else a
    telemetry exporter; ValueError when neither is recognised."""
    if family is not None:
        state.family, state.names = family, maps[family]
        return
    exporter = hardware.detect(set(families))
    if exporter is None:
        raise ValueError(
            f"no known metric name in the answer (families: {', '.join([*maps, *hardware.FAMILIES])}); "
            "add a --metrics-map FILE.json naming its metrics"
        )
    state.family, state.telemetry = exporter, TelemetrySeries(exporter)


def _rate(previous: Sample | None, sample: Sample, column: str) -> float | str:
    """Per-second increase of counter `column` since `previous` ("" without one)."""
    if previous is None or column not in previous.values or column not in sample.values:
        return ""
    dt_s = sample.epoch_s - previous.epoch_s
    delta = sample.values[column] - previous.values[column]
    return round(delta / dt_s, 3) if dt_s > 0 and delta >= 0 else ""


def _hist_fields(hist: Hist | None) -> tuple[Any, ...]:
    """(count, mean ms, p50 ms, p90 ms) of the observations in `hist`; "" where undefined."""
    if hist is None:
        return ("", "", "", "")
    values = (hist.mean_ms(), hist.quantile_ms(0.5), hist.quantile_ms(0.9))
    return (round(hist.count), *("" if v is None else round(v, 3) for v in values))


def new_scraper(settings: ScrapeSettings, results_dir: Path, t_start_s: float) -> ServerScraper | None:
    """The scraper of the run's --metrics-url values, its CSV opened (None when there are none)."""
    if not settings.metrics_url:
        return None
    maps = all_maps(load_maps(settings.metrics_map) if settings.metrics_map else None)
    return ServerScraper(results_dir, settings.metrics_url, settings.metrics_interval_s, maps, t_start_s)
