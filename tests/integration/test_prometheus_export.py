"""The live export (`--prometheus-port`) scraped by a real Prometheus (Debian's `prometheus`, installed by `make
prometheus`) during a master + 2 workers run against the simulator, whose vLLM-style /metrics and DCGM page it scrapes
too: after the run its answers agree with summary.json — counters and histogram counts exactly, the quantile gauges
within HdrHistogram precision, the run's totals and each scenario name's series (`breakdowns.name`) — and every PromQL
query of the Grafana dashboard (deploy/grafana/llm-locust.json) returns data.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import gevent
import pytest
from conftest import LOCUSTFILE, ROOT, options, read_summary, run_local, run_locust, wait_for
from harness.dashboard import dashboard_queries
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.config.link_auth import free_port
from llm_locust.metrics import declarations
from llm_locust.sim import run_sim

PROMETHEUS = shutil.which("prometheus")
SCENARIO = ROOT / "locustfiles" / "scenarios" / "support_chat.py"
"""Named requests (`name=`: "refund", "refund follow-up", "outage"), run beside the built-in chat user."""
RUN_S = 20
HDR_REL = 1e-3  # HdrHistogram's 3 significant digits

needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="no `prometheus` binary (Debian's package: `make prometheus`, as root)"
)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class Prometheus:
    """A real Prometheus on a free loopback port, scraping `targets` ({job: (host:port, path)}) every second."""

    def __init__(self, tmp_path: Path, targets: dict[str, tuple[str, str]]) -> None:
        jobs = "".join(
            f"  - job_name: {job}\n    metrics_path: {path}\n    static_configs:\n      - targets: ['{address}']\n"
            for job, (address, path) in targets.items()
        )
        config = tmp_path / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = (tmp_path / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address={self.url.removeprefix('http://')}"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def query(self, expr: str, start_s: float, end_s: float) -> list[dict[str, Any]]:
        """The series of `expr` over [start_s, end_s] (a range query, one point a second)."""
        params = urllib.parse.urlencode({"query": expr, "start": start_s, "end": end_s, "step": 1})
        answer = _get(f"{self.url}/api/v1/query_range?{params}")
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]["result"]

    def last(self, expr: str, start_s: float, end_s: float) -> float:
        """The last value of `expr`, which must be one series, over [start_s, end_s]."""
        series = self.query(expr, start_s, end_s)
        assert len(series) == 1, (expr, series)
        return float(series[0]["values"][-1][1])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@needs_prometheus
def test_a_real_prometheus_agrees_with_summary_json_and_serves_every_dashboard_query(tmp_path: Path) -> None:
    export_port = free_port()
    results = tmp_path / "results"
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16", "--fault", "http_500=0.05") as sim:
        sim_address = sim.url.removeprefix("http://")
        prometheus = Prometheus(tmp_path, {
            "llm-locust": (f"127.0.0.1:{export_port}", "/metrics"),
            "vllm": (sim_address, "/metrics"),
            "dcgm": (sim_address, "/gpu-metrics"),
        })  # fmt: skip
        try:
            wait_for(prometheus.ready, 30, "Prometheus to be ready")
            t_start = time.time()
            proc = run_locust(  # the built-in chat user and a scenario's named requests, 3 users each
                f"{LOCUSTFILE},{SCENARIO}", "--processes", "2", "-u", "6", "-r", "6", "--run-time", f"{RUN_S}s",
                "--host", sim.url, "--max-tokens", "16", "--results-dir", str(results),
                "--prometheus-port", str(export_port), "--stop-timeout", "10", timeout_s=RUN_S + 60,
            )  # fmt: skip
            # the queries' points are whole steps of 1 s from t_start, and a point's subquery ([5m:1s]) reads the
            # samples up to its own whole second: the last sample (the scrape the master waited for, just before it
            # exited) is seen only from a point a second or more after it — up to 2 s after the exit
            t_end = time.time() + 3
            output = proc.stdout + proc.stderr
            assert "Prometheus metrics at http://127.0.0.1:" in output, output[-3000:]
            summary = read_summary(results)
            run = results.name
            assert summary["run"]["workers_max"] == 2
            last = lambda expr: prometheus.last(f"last_over_time(({expr})[5m:1s])", t_start, t_end)  # noqa: E731
            totals = f'run="{run}",replica="",model="",name=""'

            # counters: exactly summary.json's
            throughput = summary["throughput"]
            assert throughput["requests_ok"] > 100 and sum(summary["failures"].values()) > 0
            assert last(f'sum(llm_locust_requests_total{{{totals},outcome="ok"}})') == throughput["requests_ok"]
            assert last(f'sum(llm_locust_requests_total{{{totals},outcome="cancelled"}})') == 0
            for kind, n in summary["failures"].items():
                assert last(f'sum(llm_locust_requests_total{{{totals},error_type="{kind}"}})') == n, kind
            assert last(f"sum(llm_locust_output_tokens_total{{{totals}}})") == throughput["output_tokens"]
            assert last(f"sum(llm_locust_input_tokens_total{{{totals}}})") == throughput["prompt_tokens"]

            # every latency's histogram: its count and sum exactly summary.json's; run quantiles within HDR precision
            for metric in declarations.LATENCIES:
                stats = summary["metrics"][f"{metric.name}_ms"]
                family = metric.instrument.replace(".", "_") + "_seconds"
                if not stats["count"]:
                    continue
                assert last(f"sum({family}_count{{{totals}}})") == stats["count"], metric.name
                mean_ms = last(f"sum({family}_sum{{{totals}}}) / sum({family}_count{{{totals}}})") * 1e3
                assert mean_ms == pytest.approx(stats["mean"], abs=1e-3), metric.name
                for stat, quantile in (("p50", "0.5"), ("p90", "0.9"), ("p99", "0.99")):
                    gauge = last(f'llm_locust_latency_quantile_seconds{{run="{run}",metric="{metric.name}",'
                                 f'quantile="{quantile}",window="run"}}') * 1e3  # fmt: skip
                    assert gauge == pytest.approx(stats[stat], rel=HDR_REL, abs=1e-3), (metric.name, stat)
            # each name's series: exactly its `breakdowns.name` entry (the built-in user's requests are in none)
            named = {entry["label"]: entry for entry in summary["breakdowns"]["name"]}
            assert set(named) == {"refund", "refund follow-up", "outage"}, named
            sent = throughput["requests_ok"] + throughput["requests_failed"]
            assert 0 < sum(e["requests_ok"] + e["requests_failed"] for e in named.values()) < sent  # the chat user's
            ttft = "gen_ai_server_time_to_first_token_seconds"
            for name, entry in named.items():
                selector = f'run="{run}",name="{name}"'
                assert last(f'sum(llm_locust_requests_total{{{selector},outcome="ok"}})') == entry["requests_ok"], name
                failed = entry["requests_failed"]
                assert last(f'sum(llm_locust_requests_total{{{selector},outcome="failed"}})') == failed, name
                assert last(f"sum({ttft}_count{{{selector}}})") == entry["metrics"]["ttft_ms"]["count"], name
                assert (
                    last(f"sum(llm_locust_output_tokens_total{{{selector}}})") == entry["throughput"]["output_tokens"]
                )

            # the last window's quantiles: the time series' last row (the last closed window when it was scraped)
            with (results / "llm_timeseries.csv").open() as rows:
                last_row = list(csv.DictReader(rows))[-1]
            for stat, quantile in (("p50", "0.5"), ("p99", "0.99")):
                gauge_ms = last(f'llm_locust_latency_quantile_seconds{{run="{run}",metric="ttft",quantile="{quantile}",'
                                'window="last"}') * 1e3  # fmt: skip
                assert gauge_ms == pytest.approx(float(last_row[f"ttft_ms_{stat}"]), abs=1e-3), stat

            # every dashboard query returns data
            empty = []
            for title, expr in dashboard_queries(run):
                if not prometheus.query(expr, t_start, t_end):
                    empty.append(f"{title}: {expr}")
            assert empty == []
        finally:
            prometheus.stop()


def test_a_local_runner_exports_each_replica_and_waits_for_the_last_scrape(tmp_path: Path) -> None:
    """A local runner over two replicas, scraped every 0.5 s while it runs: at the end it waits for one more
    scrape, whose counters are summary.json's, the run's totals and each replica's series."""
    port = free_port()
    scrapes: list[str] = []

    def scrape_forever() -> None:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    scrapes.append(response.read().decode())
            except OSError:
                pass
            gevent.sleep(0.5)

    with run_sim("--replicas", "2", "--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8") as sim:
        opts = options("--host", sim.host, "--max-tokens", "8", "--results-dir", str(tmp_path),
                       "--prometheus-port", str(port))  # fmt: skip
        scraper = gevent.spawn(scrape_forever)
        try:
            run_local(opts, users=4, seconds=3)
        finally:
            scraper.kill()
    summary = read_summary(tmp_path)
    ok: dict[str, float] = {}
    for family in text_string_to_metric_families(scrapes[-1]):
        for sample in family.samples:
            if sample.name == "llm_locust_requests_total" and sample.labels["outcome"] == "ok":
                ok[sample.labels["replica"]] = sample.value
    by_replica = {row["label"]: row["requests_ok"] for row in summary["breakdowns"]["replica"]}
    assert ok.pop("") == summary["throughput"]["requests_ok"] > 0  # the run's totals: no replica label
    assert ok == by_replica and set(ok) == {replica.url for replica in sim.replicas}
