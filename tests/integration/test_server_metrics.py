"""The server's perspective (--metrics-url): scraped from the simulator's real /metrics while a
run pushes it past its batch limit; dead and garbage URLs recorded, never fatal; the report."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import LOCUSTFILE, free_port, read_summary, run_locust, wait_for
from harness.report_figures import array, figures, trace
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.report.build import build_report
from llm_locust.scrape.server_maps import BUILTIN_MAPS
from llm_locust.sim import run_sim

USERS = 12
MAX_BATCH = 4
OUTPUT_TOKENS = 32
GARBAGE_SERVER = (
    "import http.server, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = b'<html>this is { not prometheus\\nvllm:num_requests_running{ 12 x y z\\n'\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "    def log_message(self, *a): pass\n"
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
)


@pytest.fixture(scope="module")
def garbage_url():
    """A tiny local HTTP server answering every GET with text that is not Prometheus exposition."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", GARBAGE_SERVER, str(port)])
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for(lambda: _answers(url), 10, "the garbage metrics server")
        yield url
    finally:
        process.terminate()
        process.wait(5)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def saturated_run(tmp_path_factory, garbage_url):
    """12 users on a batching simulator with 4 batch slots, scraped every 0.5 s, plus a dead URL
    (a free port with nothing listening) and the garbage one."""
    results = tmp_path_factory.mktemp("server") / "run"
    dead_url = f"http://127.0.0.1:{free_port()}/metrics"
    with run_sim("--timing", "batching", "--max-batch", str(MAX_BATCH), "--output-tokens", str(OUTPUT_TOKENS)) as sim:
        done = run_locust(
            LOCUSTFILE, "-u", str(USERS), "-r", str(USERS), "-t", "6s", "--host", sim.url, "--only-summary",
            "--results-dir", str(results), "--csv", str(results / "locust"),
            "--metrics-url", f"{sim.url}/metrics", "--metrics-url", dead_url, "--metrics-url", garbage_url,
            "--metrics-interval-s", "0.5",
        )  # fmt: skip
        with urllib.request.urlopen(f"{sim.url}/sim/trace") as response:
            trace_records = json.loads(response.read())
        with urllib.request.urlopen(f"{sim.url}/metrics") as response:
            exposition = response.read().decode()
    return done, results, sim.url, dead_url, garbage_url, (trace_records, exposition)


def test_scraped_queue_rises_past_the_batch_limit_and_tokens_match_the_client(saturated_run):
    done, results, sim_url, _, _, _ = saturated_run
    assert done.returncode == 0, done.stderr[-3000:]
    with (results / "server_metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["url"] == f"{sim_url}/metrics"]
    assert len(rows) >= 6 and all(r["family"] == "vllm" for r in rows)
    assert max(float(r["waiting"]) for r in rows) > 0  # 12 users, 4 slots: a queue
    assert max(float(r["running"]) for r in rows) == MAX_BATCH
    assert max(float(r["kv_cache_usage"]) for r in rows) == 1.0

    summary = read_summary(results)
    entry = next(u for u in summary["server"]["urls"] if u["url"] == f"{sim_url}/metrics")
    assert entry["family"] == "vllm" and entry["scrapes_failed"] == 0 and entry["scrapes_ok"] == len(rows)
    assert entry["running_max"] == MAX_BATCH and entry["waiting_max"] >= USERS - MAX_BATCH - 1
    client_tokens = summary["throughput"]["output_tokens"]
    # the server also counts what it generated for the requests cut off at the end (at most one per user)
    assert client_tokens > 0
    assert 0 <= entry["generation_tokens"] - client_tokens <= USERS * OUTPUT_TOKENS
    requests_ok = summary["throughput"]["requests_ok"]
    assert 0 <= entry["ttft_count"] - requests_ok <= USERS  # one server TTFT observation per finished request
    # server TTFT is inside the client's (the client adds the network and its own overhead)
    assert 0 < entry["ttft_mean_ms"] <= summary["metrics"]["ttft_ms"]["mean"] + 5
    assert entry["queue_time_mean_ms"] > 0


def test_server_histograms_are_the_trace_records(saturated_run):
    """The simulator's histograms observe exactly its finished requests (ground truth: /sim/trace)."""
    records, exposition = saturated_run[-1]
    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    finished = [r for r in records if r["finish_reason"] and not r["cancelled"]]
    ttft = {s.name: s.value for s in families["vllm:time_to_first_token_seconds"].samples if "le" not in s.labels}
    assert ttft["vllm:time_to_first_token_seconds_count"] == len(finished)
    expected_s = sum(r["token_times"][0] - r["t_recv"] for r in finished)
    assert ttft["vllm:time_to_first_token_seconds_sum"] == pytest.approx(expected_s)
    queue = {s.name: s.value for s in families["vllm:request_queue_time_seconds"].samples if "le" not in s.labels}
    assert queue["vllm:request_queue_time_seconds_sum"] == pytest.approx(sum(r["queue_s"] for r in finished))
    generated = families["vllm:generation_tokens"].samples[0].value
    assert generated == sum(r["completion_tokens"] for r in records)


def test_dead_and_garbage_urls_are_recorded_warnings_and_the_run_completes(saturated_run):
    done, results, _, dead_url, garbage_url, _ = saturated_run
    assert done.returncode == 0
    summary = read_summary(results)
    assert summary["status"] == "complete" and summary["throughput"]["requests_ok"] > 0
    by_url = {u["url"]: u for u in summary["server"]["urls"]}
    for url, error in ((dead_url, "URLError"), (garbage_url, "ValueError")):
        entry = by_url[url]
        assert entry["scrapes_ok"] == 0 and entry["scrapes_failed"] >= 6
        assert error in entry["last_error"]
        assert any(url in w and "scrapes failed" in w for w in summary["warnings"])
        assert f"server metrics {url}: scrape failed" in done.stderr


def test_report_shows_the_queue_and_the_server_vs_client_table(saturated_run, tmp_path):
    _, results, sim_url, *_ = saturated_run
    report = build_report([results], tmp_path / "report.html", png=False)
    figs = figures(report.html_path.read_text())
    with (results / "server_metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["url"] == f"{sim_url}/metrics"]
    waiting = trace(figs["server_timeline"], run="run", url=f"{sim_url}/metrics", column="waiting")
    assert array(waiting["y"]).tolist() == [float(r["waiting"]) for r in rows]
    assert array(waiting["x"]).tolist() == [float(r["elapsed_s"]) for r in rows]
    assert max(array(waiting["y"])) > 0
    client_tps = trace(figs["server_timeline"], run="run", column="client_output_tokens_per_s")
    assert len(array(client_tps["y"])) >= 1
    page = report.html_path.read_text()
    assert "Server&#x27;s perspective" in page and "client − server TTFT ms" in page


def test_workers_never_scrape_only_the_master(tmp_path):
    """With --processes 2 the number of scrapes is the master's alone (not multiplied by workers)."""
    hits_file = tmp_path / "hits"
    counting_server = GARBAGE_SERVER.replace(
        "    def do_GET(self):\n", f"    def do_GET(self):\n        open({str(hits_file)!r}, 'a').write('x')\n"
    )
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", counting_server, str(port)])
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/"), 10, "the metrics server")
        hits_file.write_text("")
        with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "8") as sim:
            started = time.monotonic()
            done = run_locust(
                LOCUSTFILE, "-u", "2", "-r", "2", "-t", "4s", "--host", sim.url, "--only-summary", "--processes", "2",
                "--results-dir", str(tmp_path / "run"), "--metrics-url", f"http://127.0.0.1:{port}/metrics",
                "--metrics-interval-s", "1",
            )  # fmt: skip
            elapsed_s = time.monotonic() - started
    finally:
        process.terminate()
        process.wait(5)
    assert done.returncode == 0, done.stderr[-3000:]
    hits = len(hits_file.read_text())
    entry = read_summary(tmp_path / "run")["server"]["urls"][0]
    assert hits == entry["scrapes_failed"] >= 3  # every scrape of the URL was the master's
    assert hits <= elapsed_s + 2


def test_metrics_map_file_names_another_servers_metrics(tmp_path):
    """A --metrics-map family is detected (first on a tie with a built-in map) and used; a bad map
    file is a one-line error (exit 2)."""
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"mysim": {column: list(names) for column, names in BUILTIN_MAPS["vllm"].items()}}))
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "8") as sim:
        done = run_locust(
            LOCUSTFILE, "-u", "2", "-r", "2", "-t", "2s", "--host", sim.url, "--only-summary",
            "--results-dir", str(tmp_path / "run"), "--metrics-url", f"{sim.url}/metrics",
            "--metrics-map", str(mapping), "--metrics-interval-s", "0.5",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        entry = read_summary(tmp_path / "run")["server"]["urls"][0]
        assert entry["family"] == "mysim" and entry["generation_tokens"] > 0

        mapping.write_text(json.dumps({"mysim": {"queue_length": "x"}}))
        bad = run_locust(LOCUSTFILE, "-u", "1", "-t", "1s", "--host", sim.url, "--metrics-url", f"{sim.url}/metrics",
                         "--metrics-map", str(mapping))  # fmt: skip
    assert bad.returncode == 2
    assert f"--metrics-map {mapping}: family 'mysim': unknown column 'queue_length'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_metrics_url_with_a_password_is_redacted(tmp_path):
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "8") as sim:
        url = sim.url.replace("http://", "http://scraper:s3cret-token@") + "/metrics"
        done = run_locust(
            LOCUSTFILE, "-u", "1", "-r", "1", "-t", "2s", "--host", sim.url, "--only-summary",
            "--results-dir", str(tmp_path / "run"), "--metrics-url", url, "--metrics-interval-s", "0.5",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for path in (tmp_path / "run").iterdir():
        assert "s3cret-token" not in path.read_text(), path.name
    assert "s3cret-token" not in done.stdout + done.stderr
    assert read_summary(tmp_path / "run")["server"]["urls"][0]["scrapes_ok"] >= 2
