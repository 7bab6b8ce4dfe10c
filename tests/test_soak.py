"""The soak memory benchmark, short (CI skips it: `make test-all`)."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
from conftest import ROOT, read_summary


@pytest.mark.slow
def test_soak_memory_benchmark_short_run(tmp_path):
    command = [sys.executable, "benchmarks/soak_memory.py", "--minutes", "1", "--warmup-minutes", "0.5",
               "--users", "50", "--sample-s", "5", "--results-dir", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "growth %" in proc.stdout and "verdict" in proc.stdout

    with (tmp_path / "rss.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["process"] for r in rows} == {"master", "worker1", "worker2"}
    assert all(0 < float(r["rss_mb"]) < 500 for r in rows)
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] > 100 and summary["run"]["workers_max"] == 2
