"""The benchmarks still run end to end on tiny settings and print their tables (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT


def test_capacity_benchmark_prints_its_table(tmp_path):
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "client_capacity.py"), "--clients", "fast,guidellm",
               "--streams", "2,3", "--run-time-s", "4", "--warmup-s", "1", "--itl-ms", "5", "--tokens", "16",
               "--tokens-spread", "4", "--no-stop", "--guidellm", str(tmp_path / "no-guidellm"),
               "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.split()[:4] == ["client", "streams", "scheme", "events/s"])
    assert all(title in header for title in ("CPU %", "ITL err p50", "TTFT err p50", "RSS MB", "in bound"))
    table = [line.split() for line in lines if line.split()[:1] == ["fast"]]
    assert [row[1:3] for row in table] == [["2", "http"], ["3", "http"]]  # --scheme: http unless asked
    assert "guidellm skipped" in " ".join(lines)  # no GuideLLM venv at that path: said, not a crash
    rows = json.loads(out.read_text())["rows"]
    assert [r["streams"] for r in rows] == [2, 3]
    for row in rows:
        assert row["events_per_s"] > 0 and row["failures"] == 0 and row["rss_mb"] > 0
        assert {
            "itl_err_p99_ms",
            "ttft_err_p99_ms",
            "cpu_pct",
            "cpu_us_per_event",
            "in_bound",
            "rss_growth_mb",
        } <= row.keys()


def test_capacity_benchmark_with_scoring_on_and_off(tmp_path):
    """`--scoring both`: the same level on a dataset without references, then with them (every answer scored)."""
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "client_capacity.py"), "--streams", "2", "--run-time-s", "4",
               "--warmup-s", "1", "--itl-ms", "5", "--tokens", "16", "--tokens-spread", "4", "--no-stop",
               "--scoring", "both", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    table = [line.split() for line in done.stdout.splitlines() if line.split()[:1] == ["fast"]]
    assert [row[-1] for row in table] == ["off", "on"]
    rows = json.loads(out.read_text())["rows"]
    assert [r["scoring"] for r in rows] == ["off", "on"]
    assert all(r["events_per_s"] > 0 and r["failures"] == 0 for r in rows)


def test_overhead_curve_prints_its_table(tmp_path):
    """`overhead_curve.py` at 1 and 2 streams with 1 and 2 processes: a row each, with vLLM's TTFT error, the TTFT
    error against the simulator and both ITL standard deviations (the client's from its histograms)."""
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "overhead_curve.py"), "--streams", "1,2", "--processes",
               "1,2", "--run-time-s", "4", "--warmup-s", "1", "--tokens", "16", "--tokens-spread", "4",
               "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any(line.split()[:3] == ["proc", "streams", "events/s"] for line in done.stdout.splitlines())
    rows = json.loads(out.read_text())["rows"]
    assert [(r["processes"], r["streams"]) for r in rows] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    for row in rows:
        assert row["events_per_s"] > 0 and row["failures"] == 0, row
        assert row["itl_std_ms"] > 0 and row["server_itl_std_ms"] > 0 and row["ttft_mean_err_ms"] >= 0, row
        assert row["ttft_over_ms"] == row["ttft_mean_ms"] - 50.0


def test_long_context_benchmark_joins_every_request(tmp_path):
    """`long_context.py` on two short lengths: every request after the warm-up joined with the simulator's trace."""
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "long_context.py"), "--prompt-tokens", "50,2000", "--users",
               "2", "--run-time-s", "4", "--warmup-s", "1", "--max-tokens", "8", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any(line.split()[:3] == ["prompt", "requests", "diff"] for line in done.stdout.splitlines())
    rows = json.loads(out.read_text())
    assert [row["prompt_tokens"] for row in rows] == [50, 2000]
    for row in rows:
        assert 0 < row["joined"] <= row["requests"] and row["client_cpu_ms_per_request"] > 0, row
        assert row["diff_p50_ms"] <= row["diff_p99_ms"] <= row["diff_max_ms"], row


@pytest.mark.slow
def test_trace_capacity_benchmark_prints_its_table(tmp_path):
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "trace_capacity.py"), "--rates", "20", "--run-time-s", "4",
               "--warmup-s", "1", "--users", "20", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any(line.split()[:3] == ["req/s", "events/s", "send"] for line in done.stdout.splitlines())
    (row,) = json.loads(out.read_text())["rows"]
    sent, traced = (int(n) for n in row["sent"].split("/"))
    assert sent == traced > 40 and row["events_per_s"] > 0 and row["err_p50_ms"] >= 0


def test_master_scale_benchmark_prints_its_table(tmp_path):
    """A real master and 3 synthetic workers, 2 reports each: the table, exact counts, and py-spy's summary."""
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "master_scale.py"), "--workers", "3", "--rounds", "2",
               "--requests", "20", "--tail-s", "2", "--profile", "--profile-top", "5", "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    header = next(line for line in done.stdout.splitlines() if line.split()[:2] == ["workers", "reports"])
    assert all(title in header for title in ("ms/report", "workers/core", "delay p50", "RSS MB", "exact"))
    (row,) = json.loads(out.read_text())
    assert row["workers"] == row["acked"] == 3 and row["reports"] == 6 and row["exact"] is True
    assert row["requests_merged"] == row["requests_sent"] == 120 and row["ms_per_report"] > 0
    assert "where the master's time went" in done.stdout
