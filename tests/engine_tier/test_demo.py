"""`make demo-engine` end to end, shortened: a sweep against llama-server, the table, the report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.engine


def test_demo_engine_end_to_end(engine, tmp_path):
    results = tmp_path / "demo"
    command = [sys.executable, "-m", "engine.demo", "--sweep-users", "1,2", "--step-duration-s", "4",
               "--warmup-s", "1", "--max-tokens", "8", "--prompt-tokens", "16",
               "--results-dir", str(results)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    assert [step["users"] for step in summary["steps"]] == [1, 2]
    assert summary["failures"] == {}
    assert all(step["throughput"]["requests_ok"] > 0 for step in summary["steps"])
    table = done.stdout[done.stdout.index("users  requests") :]
    assert len(table.splitlines()[1].split()) == 6  # users, requests, tok/s, TTFT p50, TTFT p90, TPOT p50
    assert (results / "report.html").exists() and (results / "llama-server.log").exists()
