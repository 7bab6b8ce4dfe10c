"""A real LocalRunner streaming from the simulator: accuracy against ground truth, results folder."""

from __future__ import annotations

import csv
from itertools import pairwise

import pytest
from conftest import ChatUser, free_port, options, read_summary, run_local

from llm_locust.runtime.users import CompletionsUser

pytestmark = pytest.mark.alone  # TTFT/ITL p50s within 5 ms, ITL within 2 ms of the trace


def test_accuracy_against_fixed_timing(fixed_sim, tmp_path):
    """TTFT 200 ms, ITL 20 ms, 64 tokens at low load: p50s within 5 ms, token counts exact."""
    fixed_sim.reset()
    opts = options("--host", fixed_sim.url, "--max-tokens", "64", "--ignore-eos", "--results-dir", str(tmp_path),
                   "--interval-s", "1")  # fmt: skip
    env = run_local(opts, users=4, seconds=5)
    summary = read_summary(tmp_path)
    m = summary["metrics"]
    assert summary["throughput"]["requests_ok"] >= 8
    assert summary["failures"] == {}
    assert abs(m["ttft_ms"]["p50"] - 200) <= 5, m["ttft_ms"]
    assert abs(m["itl_ms"]["p50"] - 20) <= 5, m["itl_ms"]
    assert abs(m["tpot_ms"]["p50"] - 20) <= 5, m["tpot_ms"]
    assert abs(m["e2e_ms"]["p50"] - (200 + 63 * 20)) <= 10, m["e2e_ms"]
    assert m["output_tokens"]["min"] == m["output_tokens"]["max"] == 64
    assert m["itl_ms"]["count"] == 63 * summary["throughput"]["requests_ok"]
    assert summary["tokens"]["sources"] == {"usage": summary["throughput"]["requests_ok"]}
    assert summary["tokens"]["usage_event_mismatches"] == 0

    # against the simulator's own timestamps: what it sent is what we measured
    truth = [r for r in fixed_sim.trace() if not r.get("cancelled")]
    assert len(truth) >= summary["throughput"]["requests_ok"]
    server_itl_ms = sorted((b - a) * 1000 for r in truth for a, b in pairwise(r["token_times"]))
    assert abs(m["itl_ms"]["p50"] - server_itl_ms[len(server_itl_ms) // 2]) <= 2

    # Locust's own rows: the HTTP row reports E2E and output tokens; nothing else is counted as a request
    post = env.stats.get("/v1/chat/completions", "POST")
    assert post.num_requests == summary["throughput"]["requests_ok"]
    assert abs(post.median_response_time - m["e2e_ms"]["p50"]) <= 0.05 * m["e2e_ms"]["p50"]
    assert post.total_content_length == 64 * post.num_requests
    assert {method for name, method in env.stats.entries} == {"POST", "GET"}  # GET /v1/models, once
    assert env.stats.total.num_requests == post.num_requests + env.stats.get("/v1/models", "GET").num_requests


def test_results_folder_time_series(fast_sim, tmp_path):
    opts = options("--host", fast_sim.url, "--max-tokens", "16", "--results-dir", str(tmp_path), "--interval-s", "1")
    run_local(opts, users=3, seconds=4)
    summary = read_summary(tmp_path)
    with (tmp_path / "llm_timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 3
    assert sum(int(r["requests_ok"]) for r in rows) == summary["throughput"]["requests_ok"]
    busy = [r for r in rows if int(r["requests_ok"]) > 0]
    assert all(float(r["ttft_ms_p50"]) > 15 for r in busy)
    assert max(int(r["users"]) for r in rows) == 3
    assert summary["status"] == "complete"
    assert summary["timeseries"]["rows"] == len(rows)
    assert summary["run"]["role"] == "local" and summary["run"]["users_max"] == 3


def test_text_completions_user(fast_sim, tmp_path):
    class TextUser(CompletionsUser):
        pass

    opts = options("--host", fast_sim.url, "--max-tokens", "8", "--ignore-eos", "--results-dir", str(tmp_path))
    env = run_local(opts, users=2, seconds=2, user_classes=[TextUser])
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] >= 2 and summary["failures"] == {}
    assert summary["metrics"]["output_tokens"]["max"] == 8
    assert env.stats.get("/v1/completions", "POST").num_requests == summary["throughput"]["requests_ok"]


def test_wrong_model_is_counted_as_http_4xx(fast_sim, tmp_path):
    opts = options("--host", fast_sim.url, "--model", "no-such-model", "--results-dir", str(tmp_path))
    env = run_local(opts, users=2, seconds=1.5, user_classes=[ChatUser])
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] == 0
    assert summary["failures"]["http_4xx"] >= 2
    assert summary["metrics"]["ttft_ms"]["count"] == 0
    post = env.stats.get("/v1/chat/completions", "POST")
    assert post.num_failures == summary["failures"]["http_4xx"]
    (error,) = {str(e.error) for e in env.stats.errors.values()}
    assert error.startswith("http_4xx: HTTP 404") and "no-such-model" in error


def test_unreachable_host_is_counted_as_connect(tmp_path):
    opts = options("--host", f"http://127.0.0.1:{free_port()}", "--model", "m", "--results-dir", str(tmp_path))
    run_local(opts, users=1, seconds=0.5)
    summary = read_summary(tmp_path)
    assert summary["failures"].get("connect", 0) >= 1 and summary["throughput"]["requests_ok"] == 0
