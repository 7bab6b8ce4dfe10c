"""llama-server killed (SIGKILL) while it streams: the streams in flight fail as cut short, the
requests after it as refused connections, and the results folder is complete and reportable."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import LOCUSTFILE, ROOT, read_summary, wait_for

from engine.server import run_llama_server

pytestmark = pytest.mark.engine

USERS = 2
REQUESTS = 30  # the 2 cut streams, then refused connections until the run has this many


def _streaming(server) -> bool:
    """True once every slot is generating (a few tokens decoded each)."""
    slots = server.get("/slots")
    busy = [slot for slot in slots if slot.get("is_processing") and slot["next_token"][0]["n_decoded"] >= 4]
    return len(busy) == USERS


def test_a_killed_server_gives_cut_streams_then_refused_connections(engine, tmp_path):
    results = tmp_path / "killed"
    with run_llama_server(engine, tmp_path / "llama-server.log", parallel=USERS) as server:
        command = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
            "-u", str(USERS), "-r", str(USERS), "-t", "60s", "--max-requests", str(REQUESTS),
            "--host", server.url, "--model", engine.alias, "--max-tokens", "2000", "--ignore-eos",
            "--server-family", "llamacpp", "--prompt-tokens", "16",
            "--results-dir", str(results), "--csv", str(results / "locust"),
        ]  # fmt: skip
        locust = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: _streaming(server), 60, "both streams to be generating")
            server.kill()
            _, stderr = locust.communicate(timeout=60)
        finally:
            if locust.poll() is None:
                locust.kill()
                locust.wait()
    assert locust.returncode == 1, stderr[-3000:]  # failures, and not the command's fault (that is 2)
    summary = read_summary(results)
    assert summary["status"] == "complete"
    assert summary["throughput"]["requests_ok"] == 0
    failures = summary["failures"]
    assert set(failures) <= {"transport", "incomplete", "connect"}, failures
    assert failures.get("transport", 0) + failures.get("incomplete", 0) == USERS, failures
    assert failures["connect"] >= 1
    assert sum(failures.values()) >= REQUESTS
    assert summary["metrics"]["ttft_failed_ms"]["count"] == USERS  # the cut streams had their first token
    assert "stopped or crashed during the run" in summary["diagnosis"]

    done = subprocess.run(
        [sys.executable, "-m", "llm_locust.cli", "report", str(results), "--no-png"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (results / "report.html").stat().st_size > 0
