"""The soak locustfile with its own defaults (bounded to seconds), and the soak memory benchmark, short
(the benchmark is `slow`: `make test-all`)."""

from __future__ import annotations

import ast
import csv
import subprocess
import sys

import pytest
from conftest import ROOT, read_summary, run_locust

SOAK = ROOT / "locustfiles" / "soak.py"


def soak_defaults() -> dict[str, float]:
    """`SOAK_DEFAULTS` as soak.py defines it (read, not imported: importing a locustfile installs
    listeners on Locust's global events, changing every later test's options)."""
    for node in ast.parse(SOAK.read_text()).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == [
            "SOAK_DEFAULTS"
        ]:
            return ast.literal_eval(node.value)
    raise AssertionError("no SOAK_DEFAULTS in soak.py")


def test_soak_locustfile_defaults_through_master_and_workers(fast_sim, tmp_path):
    """`locust -f locustfiles/soak.py` as documented, with only the run time shortened: its defaults
    (30 s time-series rows, 15-min drift windows after 5 min) apply, the run passes its verdict."""
    run = run_locust(
        SOAK, "--processes", "2", "-u", "4", "-r", "4", "--run-time", "8s", "--host", fast_sim.url,
        "--csv", str(tmp_path / "locust"), timeout_s=90,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = read_summary(tmp_path)
    settings = summary["settings"]
    defaults = soak_defaults()
    assert {key: settings[key] for key in defaults} == defaults
    assert summary["status"] == "complete" and summary["verdict"]["passed"] is True
    assert summary["run"]["workers_max"] == 2 and summary["throughput"]["requests_ok"] > 20
    assert summary["drift"]["evaluated"] is False  # 8 s is no 5 min warm-up + 2 x 15 min
    with (tmp_path / "llm_timeseries.csv").open() as f:  # one 30-s row holds the whole run
        rows = list(csv.DictReader(f))
    assert len(rows) <= 2 and sum(int(r["requests_ok"]) for r in rows) == summary["throughput"]["requests_ok"]


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
