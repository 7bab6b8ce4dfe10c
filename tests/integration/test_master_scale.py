"""A real master (the `locust` CLI) and 20 synthetic workers speaking Locust's worker protocol
(`benchmarks/synthetic_workers.py`, the workers of `benchmarks/master_scale.py`): what the master merged equals exactly
the sum of what the workers sent."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, free_port

sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_workers import REPORT_S, Tally, master_command, start_processes

pytestmark = pytest.mark.alone  # a master's capacity with 20 workers

WORKERS = 20
ROUNDS = 3


def test_master_merges_exactly_what_synthetic_workers_sent(tmp_path):
    results, port = tmp_path / "results", free_port()
    run_time_s = round(ROUNDS * REPORT_S + REPORT_S + 4)
    log = (tmp_path / "master.log").open("w")
    master = subprocess.Popen(
        master_command(port, WORKERS, run_time_s, results, request_lines=True),
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    started = []
    try:
        started = start_processes(
            port, WORKERS, tmp_path, ROUNDS, requests=40, interval_s=5.0,
            time_limit_s=run_time_s + 40, request_lines=True,
        )  # fmt: skip
        master.wait(timeout=run_time_s + 40)
        for proc, _ in started:
            proc.wait(timeout=30)
    finally:
        for proc in [master, *(p for p, _ in started)]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.close()
    tally = Tally()
    for proc, out in started:
        assert proc.returncode == 0
        tally.add(json.loads(out.read_text()))
    summary = json.loads((results / "summary.json").read_text())
    assert master.returncode == summary["verdict"]["exit_code"], (tmp_path / "master.log").read_text()[-3000:]
    assert tally.acked == WORKERS and tally.quit_by_master == WORKERS
    assert tally.reports_with_data == WORKERS * ROUNDS  # every worker sent all its rounds before the end
    assert summary["status"] == "complete" and summary["run"]["workers_max"] == WORKERS
    assert tally.counts["throughput.requests_ok"] > 0 and tally.counts["metrics.itl_ms.count"] > 0
    assert tally.counts["breakdowns.prompt_tokens.128-255.requests_ok"] > 0  # breakdowns sent, and merged
    assert not tally.mismatches(summary, results)  # every count, each worker's requests, requests.jsonl's lines
