"""GPU and host telemetry (--metrics-url of a DCGM-exporter or node-exporter), for real: a Locust
run scrapes the simulator's /gpu-metrics (DCGM-exporter format, utilisation = its real batch
occupancy) and /node-metrics (this machine's /proc in node-exporter format) beside its vLLM
/metrics and a dead URL; telemetry.csv, summary.json and the report must hold what was served."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import LOCUSTFILE, free_port, read_summary, run_locust
from harness.report_figures import array, figures, trace
from prometheus_client.parser import text_string_to_metric_families

from llm_locust.metrics.vocabulary import TELEMETRY_FILE
from llm_locust.report.build import build_report
from llm_locust.scrape import hardware
from llm_locust.sim import run_sim

USERS = 12
MAX_BATCH = 4
GPUS = 2


def _lo_bytes() -> tuple[int, int]:
    """(received, transmitted) bytes of the loopback interface so far, from /proc/net/dev."""
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, counts = line.partition(":")
        if name.strip() == "lo":
            fields = counts.split()
            return int(fields[0]), int(fields[8])
    raise AssertionError("no loopback interface in /proc/net/dev")


@pytest.fixture(scope="module")
def telemetry_run(tmp_path_factory):
    """12 users on a 4-slot batching simulator with 2 simulated GPUs, scraped every 0.5 s: its
    vLLM /metrics, /gpu-metrics, /node-metrics and a dead telemetry URL."""
    if not Path("/proc/net/dev").exists():
        pytest.skip("/node-metrics reads Linux's /proc")
    results = tmp_path_factory.mktemp("telemetry") / "run"
    dead_url = f"http://127.0.0.1:{free_port()}/gpu-metrics"
    with run_sim("--timing", "batching", "--max-batch", str(MAX_BATCH), "--output-tokens", "32",
                 "--gpus", str(GPUS)) as sim:  # fmt: skip
        urls = {"server": f"{sim.url}/metrics", "gpu": f"{sim.url}/gpu-metrics", "node": f"{sim.url}/node-metrics"}
        lo_before = _lo_bytes()
        done = run_locust(
            LOCUSTFILE, "-u", str(USERS), "-r", str(USERS), "-t", "6s", "--host", sim.url, "--only-summary",
            "--results-dir", str(results), "--csv", str(results / "locust"), "--metrics-interval-s", "0.5",
            *(arg for url in (*urls.values(), dead_url) for arg in ("--metrics-url", url)),
        )  # fmt: skip
        lo_after = _lo_bytes()
    assert done.returncode == 0, done.stderr[-3000:]
    rows = defaultdict(list)
    with (results / TELEMETRY_FILE).open() as f:
        for row in csv.DictReader(f):
            rows[row["url"]].append(row)
    return results, urls, dead_url, rows, (lo_before, lo_after), done


def _scrapes(rows: list[dict[str, str]]) -> list[dict[tuple[str, str], float]]:
    """The rows of one URL as one {(device, metric): value} per scrape, in order."""
    by_time: dict[str, dict[tuple[str, str], float]] = {}
    for row in rows:
        by_time.setdefault(row["elapsed_s"], {})[(row["device"], row["metric"])] = float(row["value"])
    return [by_time[t] for t in sorted(by_time, key=float)]


def test_dcgm_rows_are_the_simulated_gpus_page(telemetry_run):
    """Every scrape holds, per GPU, the values the simulator's formulas give for one utilisation u
    (a running batch share: 0, 25, 50, 75 or 100 %), and the `all` rows aggregate them."""
    _, urls, _, rows, _, _ = telemetry_run
    scrapes = _scrapes(rows[urls["gpu"]])
    assert len(scrapes) >= 8
    occupancies = {round(100 * r / MAX_BATCH) for r in range(MAX_BATCH + 1)}
    for values in scrapes:
        u = values[("0", "gpu_util_pct")]
        assert u in occupancies
        for i in range(GPUS):
            gpu = str(i)
            assert values[(gpu, "gpu_util_pct")] == u
            assert values[(gpu, "fb_used_mib")] == 20480 + round(409.6 * u)
            assert values[(gpu, "fb_free_mib")] == 81559 - values[(gpu, "fb_used_mib")]
            assert values[(gpu, "power_w")] == pytest.approx(70 + 6.3 * u + 5 * i, abs=1e-4)
            assert values[(gpu, "temp_c")] == 35 + round(0.4 * u) + i
            assert values[(gpu, "sm_clock_mhz")] == (1980 if u else 345)
            assert values[(gpu, "gr_engine_active_pct")] == pytest.approx(u, abs=1e-3)  # ratio in %
            assert values[(gpu, "dram_active_pct")] == pytest.approx(0.6 * u, abs=1e-3)
        per_gpu = [{m: v for (d, m), v in values.items() if d == str(i)} for i in range(GPUS)]
        assert values[("all", "gpus")] == GPUS
        assert values[("all", "gpu_util_pct")] == pytest.approx(np.mean([g["gpu_util_pct"] for g in per_gpu]))
        for metric in ("fb_used_mib", "fb_free_mib", "power_w"):
            assert values[("all", metric)] == pytest.approx(sum(g[metric] for g in per_gpu), abs=1e-3)
        assert values[("all", "temp_c")] == max(g["temp_c"] for g in per_gpu)
        used, free = values[("all", "fb_used_mib")], values[("all", "fb_free_mib")]
        assert values[("all", "fb_used_pct")] == pytest.approx(100 * used / (used + free), abs=1e-3)
    assert max(v[("all", "gpu_util_pct")] for v in scrapes) == 100  # 12 users on 4 slots: a full batch


def test_summary_telemetry_is_the_csv_and_the_run_survives_a_dead_url(telemetry_run):
    results, urls, dead_url, rows, _, done = telemetry_run
    summary = read_summary(results)
    assert summary["status"] == "complete" and summary["throughput"]["requests_ok"] > 0
    by_url = {entry["url"]: entry for entry in summary["telemetry"]["urls"]}
    assert set(by_url) == {urls["gpu"], urls["node"]}
    gpu = by_url[urls["gpu"]]
    scrapes = _scrapes(rows[urls["gpu"]])
    assert gpu["family"] == "dcgm" and gpu["scrapes_failed"] == 0 and gpu["scrapes_ok"] == len(scrapes)
    assert gpu["devices"] == ["0", "1"]
    for metric in ("gpu_util_pct", "fb_used_mib", "power_w"):
        series = [v[("all", metric)] for v in scrapes]
        expected = {"mean": np.mean(series), "p50": np.median(series), "max": max(series)}
        assert gpu["all"][metric] == {stat: pytest.approx(value, abs=1e-3) for stat, value in expected.items()}
    assert gpu["per_device"]["1"]["power_w"]["max"] == pytest.approx(max(v[("1", "power_w")] for v in scrapes))
    assert summary["telemetry"]["rows"] == sum(len(r) for r in rows.values())
    # telemetry URLs are not servers; the dead one (never identified) is recorded among them, never fatal
    server_urls = {entry["url"]: entry for entry in summary["server"]["urls"]}
    assert set(server_urls) == {urls["server"], dead_url}
    assert server_urls[urls["server"]]["family"] == "vllm"
    dead = server_urls[dead_url]
    assert dead["scrapes_ok"] == 0 and dead["scrapes_failed"] >= 6 and "URLError" in dead["last_error"]
    assert any(dead_url in w and "scrapes failed" in w for w in summary["warnings"])
    assert f"server metrics {dead_url}: scrape failed" in done.stderr


def test_node_exporter_rows_are_this_hosts(telemetry_run):
    """Memory total and CPU count are this machine's; rates are within what /proc counted around
    the run; the network aggregate leaves the loopback out."""
    results, urls, _, rows, (lo_before, lo_after), _ = telemetry_run
    scrapes = _scrapes(rows[urls["node"]])
    assert len(scrapes) >= 8
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    cpus = sum(1 for line in Path("/proc/stat").read_text().splitlines() if line[:3] == "cpu" and line[3].isdigit())
    for values in scrapes:
        assert values[("all", "mem_total_bytes")] == int(meminfo["MemTotal"].split()[0]) * 1024
        assert values[("all", "cpus")] == cpus
        available, total = values[("all", "mem_available_bytes")], values[("all", "mem_total_bytes")]
        assert values[("all", "mem_used_pct")] == pytest.approx(100 * (1 - available / total), abs=1e-3)
        assert values[("all", "load1")] >= 0
    rated = scrapes[1:]  # the first scrape has no previous counters: no rates
    assert ("all", "cpu_busy_pct") not in scrapes[0]
    busy = [v[("all", "cpu_busy_pct")] for v in rated]
    assert all(0 <= b <= 100 for b in busy) and max(busy) > 0  # the run itself keeps a CPU busy
    for values in rated:
        for metric in ("net_rx_bytes_per_s", "net_tx_bytes_per_s"):
            others = [v for (d, m), v in values.items() if m == metric and d not in ("all", "lo")]
            assert values[("all", metric)] == pytest.approx(sum(others), abs=0.01)
    # the load test's own traffic runs over the loopback: what the rates add up to between the
    # first and last scrape is positive and within what /proc counted around the whole run
    times = sorted({float(row["elapsed_s"]) for row in rows[urls["node"]]})
    gaps_s = np.diff(times)
    received = sum(v[("lo", "net_rx_bytes_per_s")] * gap_s for v, gap_s in zip(rated, gaps_s, strict=True))
    assert 0 < received <= (lo_after[0] - lo_before[0]) * 1.01
    summary = {e["url"]: e for e in read_summary(results)["telemetry"]["urls"]}[urls["node"]]
    assert summary["family"] == "node" and "lo" in summary["devices"]
    assert summary["all"]["cpu_busy_pct"]["max"] == pytest.approx(max(busy), abs=1e-3)


def test_report_shows_gpu_and_host_telemetry_over_time(telemetry_run, tmp_path):
    results, urls, _, rows, _, _ = telemetry_run
    report = build_report([results], tmp_path / "report.html", png=False)
    page = report.html_path.read_text()
    figure = figures(page)["telemetry_timeline"]
    gpu_rows = [r for r in rows[urls["gpu"]] if r["device"] == "all" and r["metric"] == "gpu_util_pct"]
    util = trace(figure, url=urls["gpu"], metric="gpu_util_pct", device="all")
    assert array(util["y"]).tolist() == [float(r["value"]) for r in gpu_rows]
    assert array(util["x"]).tolist() == [float(r["elapsed_s"]) for r in gpu_rows]
    assert len(array(trace(figure, url=urls["gpu"], metric="gpu_util_pct", device="1")["y"])) == len(gpu_rows)
    power = trace(figure, url=urls["gpu"], metric="power_w", device="all")
    assert max(array(power["y"])) == pytest.approx(2 * 70 + 2 * 630 + 5)  # both GPUs at 100 %
    cpu_rows = [r for r in rows[urls["node"]] if r["device"] == "all" and r["metric"] == "cpu_busy_pct"]
    cpu = trace(figure, url=urls["node"], metric="cpu_busy_pct", device="all")
    assert array(cpu["y"]).tolist() == [float(r["value"]) for r in cpu_rows]
    assert len(array(trace(figure, metric="client_output_tokens_per_s")["y"])) >= 1
    assert "GPU and host telemetry" in page and "GPU util mean %" in page and "host CPU busy mean %" in page

    plain = tmp_path / "plain"
    shutil.copytree(results, plain, ignore=shutil.ignore_patterns("telemetry.csv", "report*"))
    summary_path = plain / "summary.json"
    summary_path.write_text(json.dumps({**json.loads(summary_path.read_text()), "telemetry": None}))
    plain_page = build_report([plain], tmp_path / "plain.html", png=False).html_path.read_text()
    assert "telemetry_timeline" not in figures(plain_page) and "GPU and host telemetry" not in plain_page


DCGM_46_MIG_PAGE = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0", UUID="GPU-a",device="nvidia0",modelName="H100",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="0", UUID="GPU-a",device="nvidia0",modelName="H100",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2"} 80
# HELP DCGM_FI_DEV_BOARD_POWER_WATTS Power draw (in W).
# TYPE DCGM_FI_DEV_BOARD_POWER_WATTS gauge
DCGM_FI_DEV_BOARD_POWER_WATTS{gpu="0", UUID="GPU-a",device="nvidia0",modelName="H100"} 310.500000
# HELP DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO gauge
DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO{gpu="0", UUID="GPU-a",device="nvidia0",modelName="H100"} 0.250000
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-a",device="nvidia0",modelName="H100"} 9223372036854775794
"""


def test_dcgm_renamed_fields_and_mig_instances_are_read():
    """DCGM 4.6's renamed fields are second names; MIG instances are devices of their own; DCGM's
    blank sentinel (a field the GPU does not support) is no value."""
    families = {}
    for family in text_string_to_metric_families(DCGM_46_MIG_PAGE):
        families[family.name] = family
    assert hardware.detect(set(families)) == "dcgm"
    triples = {(d, m): v for d, m, v in hardware.DcgmReader().read(families, 0.0)}
    assert triples[("0/mig1", "gpu_util_pct")] == 40 and triples[("0/mig2", "gpu_util_pct")] == 80
    assert triples[("all", "gpu_util_pct")] == 60
    assert triples[("0", "power_w")] == 310.5 and triples[("0", "gr_engine_active_pct")] == 25.0
    assert not any(metric == "sm_clock_mhz" for _, metric in triples)
    assert hardware.detect({"vllm:num_requests_running"}) is None


def test_simulator_rejects_zero_gpus():
    done = subprocess.run([sys.executable, "-m", "llm_locust.cli", "sim", "--port", "0", "--gpus", "0"],
                          capture_output=True, text=True, timeout=30, env=dict(os.environ))  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == "llm-locust sim: error: --gpus must be at least 1, got 0"


def _node_page(idle_s: float, user_s: float) -> dict:
    page = (
        "# TYPE node_cpu_seconds_total counter\n"
        f'node_cpu_seconds_total{{cpu="0",mode="idle"}} {idle_s}\n'
        f'node_cpu_seconds_total{{cpu="0",mode="user"}} {user_s}\n'
    )
    return {family.name: family for family in text_string_to_metric_families(page)}


def test_node_cpu_busy_survives_idle_ticks_stepping_back():
    """The kernel's idle ticks can step back a little between two reads (proc(5)); the interval
    then counts no idle time, as node-exporter does, instead of losing its CPU busy rate."""
    reader = hardware.NodeReader()
    assert not any(m == "cpu_busy_pct" for _, m, _ in reader.read(_node_page(100.0, 50.0), 1.0))
    rates = {(d, m): v for d, m, v in reader.read(_node_page(101.0, 51.0), 2.0)}
    assert rates[("all", "cpu_busy_pct")] == pytest.approx(50.0)
    rates = {(d, m): v for d, m, v in reader.read(_node_page(100.99, 52.0), 3.0)}
    assert rates[("all", "cpu_busy_pct")] == 100.0
