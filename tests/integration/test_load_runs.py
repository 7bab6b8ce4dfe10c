"""Load models end to end: the `locust` CLI (master + 2 worker processes, or local) against the simulator."""

from __future__ import annotations

import csv
import json
import math
import time

import numpy as np
import pytest
from conftest import LOCUSTFILE, ROOT, free_port, read_summary, run_locust
from harness.stats import ks_exponential

from llm_locust.metrics.length_buckets import PROMPT_LENGTHS_APPROXIMATE
from llm_locust.sim import run_sim

RATE_FILE = ROOT / "locustfiles" / "rate.py"
SWEEP_FILE = ROOT / "locustfiles" / "sweep.py"


def arrivals_s(sim, path: str = "/v1/chat/completions") -> np.ndarray:
    """When the simulator received each completion request (perf_counter s), in order."""
    return np.sort([r["t_recv"] for r in sim.trace() if r["endpoint"] == "chat"])


@pytest.mark.alone  # achieved rate within 10 %
def test_request_rate_is_split_across_two_worker_processes(fast_sim, tmp_path):
    fast_sim.reset()
    rate = 40.0
    proc = run_locust(
        RATE_FILE, "--host", fast_sim.url, "--processes", "2", "-u", "32", "-r", "32", "-t", "10s",
        "--request-rate", str(rate), "--seed", "3", "--max-tokens", "8", "--ignore-eos", "--results-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    t = arrivals_s(fast_sim)
    steady = t[(t > t[0] + 1.0) & (t < t[-1] - 0.5)]  # away from the start (spawn) and the stop
    achieved = (len(steady) - 1) / (steady[-1] - steady[0])
    assert abs(achieved - rate) / rate < 0.10, achieved  # two workers offer R together, not 2R
    gaps = np.diff(steady)
    assert ks_exponential(gaps, 1 / gaps.mean()) < 1.63 / math.sqrt(len(gaps))  # Poisson: exponential gaps
    summary = read_summary(tmp_path)
    assert summary["load"] == {
        "model": "rate",
        "rate_per_s": rate,
        "arrival": "poisson",
        "burstiness": None,
        "prompt_lengths": PROMPT_LENGTHS_APPROXIMATE,
        "trace": None,
    }
    assert summary["run"]["workers_max"] == 2
    delay = summary["metrics"]["queue_delay_ms"]
    assert delay["count"] == summary["throughput"]["requests_ok"] + summary["throughput"]["requests_failed"]
    assert delay["p50"] < 20  # 32 slots for ~4 requests in flight: requests leave on time
    by_worker = summary["run"]["queue_delay_ms_by_worker"]  # each worker's own send error
    assert len(by_worker) == 2 and sum(w["count"] for w in by_worker.values()) == delay["count"], by_worker
    assert all(w["p50"] < 20 for w in by_worker.values()), by_worker


def test_open_loop_that_falls_behind_says_so(fast_sim, tmp_path):
    # 2 users, ~100 ms per request: at most ~20 req/s can leave; 60 are offered
    proc = run_locust(
        RATE_FILE, "--host", fast_sim.url, "-u", "2", "-r", "2", "-t", "6s", "--request-rate", "60",
        "--arrival", "constant", "--results-dir", str(tmp_path), "--interval-s", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    assert summary["throughput"]["achieved_rate_per_s"] < 30
    assert summary["metrics"]["queue_delay_ms"]["p90"] > 1000
    assert any("fell behind its schedule" in w for w in summary["warnings"])
    assert "fell behind its schedule" in proc.stderr


def test_concurrency_sweep_labels_steps_and_leaves_out_warmup(tmp_path):
    # batching with room for 4 sequences: 8 users queue, so TTFT rises from step 0 to step 1
    args = ("--timing", "batching", "--max-batch", "4", "--decode-step-ms", "10", "--decode-step-ms-per-seq", "0")
    with run_sim(*args) as sim:
        proc = run_locust(
            SWEEP_FILE, "--host", sim.url, "--processes", "2", "--sweep-users", "2,8", "--step-duration-s", "5",
            "--warmup-s", "1.5", "--max-tokens", "8", "--ignore-eos", "--interval-s", "1",
            "--csv", str(tmp_path / "locust"),
        )  # fmt: skip
        served = len(sim.trace())
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    assert summary["load"]["model"] == "concurrency_sweep"
    steps = summary["steps"]
    assert [(s["index"], s["label"], s["users"]) for s in steps] == [(0, "users=2", 2), (1, "users=8", 8)]
    for step in steps:
        assert step["warmup_requests"] > 0 and step["throughput"]["requests_ok"] > 0
        assert 2.4 <= step["measure_s"] <= 4.6  # 5 s minus 1.5 s warm-up, each end on a shape tick (1 s apart)
        assert step["metrics"]["ttft_ms"]["count"] == step["throughput"]["requests_ok"]
    # every request of the run is in exactly one step, measured or warm-up
    total = summary["throughput"]["requests_ok"] + summary["throughput"]["requests_failed"]
    assert total == sum(s["throughput"]["requests_ok"] + s["warmup_requests"] for s in steps)
    assert total <= served
    assert steps[1]["metrics"]["ttft_ms"]["p50"] > steps[0]["metrics"]["ttft_ms"]["p50"] + 10
    assert steps[1]["throughput"]["output_tokens_per_s"] > steps[0]["throughput"]["output_tokens_per_s"]
    histograms = json.loads((tmp_path / "histograms.json").read_text())
    assert set(histograms["steps"]) == {"0", "1"} and "ttft" in histograms["run"]
    with (tmp_path / "llm_timeseries.csv").open() as f:
        assert {row["step"] for row in csv.DictReader(f)} >= {"0", "1"}


@pytest.mark.alone  # each step's achieved rate within 25 %
def test_rate_sweep_reaches_each_offered_rate(fast_sim, tmp_path):
    proc = run_locust(
        SWEEP_FILE, "--host", fast_sim.url, "--sweep-rates", "5,20", "--arrival", "constant",
        "--step-duration-s", "4", "--warmup-s", "1", "--max-concurrency", "16", "--results-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = read_summary(tmp_path)["steps"]
    assert [(s["label"], s["users"]) for s in steps] == [("rate=5/s", 16), ("rate=20/s", 16)]
    for step, offered in zip(steps, (5.0, 20.0), strict=True):
        assert abs(step["achieved_rate_per_s"] - offered) / offered < 0.25, step["achieved_rate_per_s"]
        assert step["metrics"]["queue_delay_ms"]["p50"] < 20


def test_max_requests_is_exact_across_workers(fast_sim, tmp_path):
    fast_sim.reset()
    started = time.monotonic()
    proc = run_locust(
        LOCUSTFILE, "--host", fast_sim.url, "--processes", "2", "-u", "6", "-r", "6", "-t", "60s",
        "--max-requests", "25", "--max-tokens", "4", "--results-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - started < 30  # ended by the limit, not by -t
    assert len(arrivals_s(fast_sim)) == 25
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] == 25
    assert summary["run"]["stop_reason"] == "--max-requests 25 reached"


@pytest.mark.alone  # the run ends within 30 s of its abort
def test_abort_error_rate_ends_a_failing_run(tmp_path):
    # 8 users reach the rule's least 20 requests in ~1 s; 2 users' backoff after each failure took 22 s
    started = time.monotonic()
    proc = run_locust(
        LOCUSTFILE, "--host", f"http://127.0.0.1:{free_port()}", "--model", "m", "-u", "8", "-r", "8", "-t", "60s",
        "--abort-error-rate", "0.5", "--results-dir", str(tmp_path),
    )  # fmt: skip
    assert time.monotonic() - started < 30
    assert "ending the run: error rate" in proc.stderr
    assert proc.returncode == 2  # nothing succeeded and the cause is in the command (the host)
    summary = read_summary(tmp_path)
    assert summary["failures"].get("connect", 0) >= 20
    assert summary["run"]["stop_reason"].startswith("error rate 100% exceeded --abort-error-rate 0.5")


@pytest.mark.parametrize(
    ("locustfile", "args", "message"),
    [
        (LOCUSTFILE, ("--request-rate", "-1"), "--request-rate must be >= 0"),
        (LOCUSTFILE, ("--sweep-users", "1,2"), "run -f locustfiles/sweep.py"),
        (SWEEP_FILE, ("--sweep-users", "1,two"), "--sweep-users '1,two': 'two' is not a int"),
        (SWEEP_FILE, ("--sweep-rates", "1", "--request-rate", "2"), "exclude each other"),
        (LOCUSTFILE, ("--arrival", "weibull"), "invalid choice: 'weibull'"),
    ],
)
def test_bad_load_options_are_one_line_errors(locustfile, args, message):
    proc = run_locust(locustfile, "--host", "http://127.0.0.1:9", "-t", "1s", *args, timeout_s=30)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


SLOW_START_LOCUSTFILE = """
from gevent import monkey
from locust import events

from llm_locust.runtime.plugin import install
from llm_locust.runtime.users import ChatCompletionsUser

install(events)
monkey.get_original("time", "sleep")(1.5)  # a slow start-up (heavy imports, a large dataset) blocks the event loop


class ChatUser(ChatCompletionsUser):
    pass
"""


def test_run_time_counts_from_the_start_of_the_test_after_a_slow_start_up(fast_sim, tmp_path):
    """Locust arms its --run-time timer with the event loop's clock, which had not moved since the loop was created:
    after a 1.5 s start-up a `-t 3s` run stopped 1.5 s early (a loaded machine's slow imports did the same)."""
    locustfile = tmp_path / "slow_start.py"
    locustfile.write_text(SLOW_START_LOCUSTFILE)
    proc = run_locust(
        locustfile, "--host", fast_sim.url, "-u", "2", "-r", "2", "-t", "3s", "--max-tokens", "8",
        "--results-dir", str(tmp_path / "results"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(tmp_path / "results")["run"]["duration_s"] >= 2.8
