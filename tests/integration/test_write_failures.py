"""A results write that fails — the disk full (a 100 KB tmpfs), the results folder removed mid-run — stops the load
within a second, says so in one line naming the file, leaves summary.json whole or absent (and requests.jsonl at its
last whole line), and exits with its own code (`EXIT_WRITE_FAILED`), through the `locust` CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LOCUSTFILE, ROOT

from llm_locust.results.outcome import EXIT_WRITE_FAILED
from llm_locust.sim import run_sim

RUN_S = 30  # the run's --run-time: a failed write must end it long before


@pytest.fixture(scope="module")
def sim():
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "16") as sim:
        yield sim


@pytest.fixture
def tiny_disk(tmp_path):
    """A 100 KB tmpfs mounted in `tmp_path` (root only: skipped where mounting is not allowed)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here (root only): {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def start(sim, results: Path) -> subprocess.Popen:
    """A headless run of 8 users writing per-request lines into `results` (console merged into stdout)."""
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "8", "-r", "8",
               "--run-time", f"{RUN_S}s", "--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "16",
               "--requests-jsonl", "--interval-s", "1", "--results-dir", str(results)]  # fmt: skip
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until_exit(proc: subprocess.Popen) -> tuple[str, float | None]:
    """The run's console, and when (perf_counter) its line saying a write failed was read (None: no such line)."""
    lines, t_failed = [], None
    for line in proc.stdout:  # the run ends by itself: a failed write, else --run-time
        lines.append(line)
        if t_failed is None and "cannot write " in line:
            t_failed = time.perf_counter()
    proc.wait(timeout=60)
    return "".join(lines), t_failed


def check_stopped(sim, proc: subprocess.Popen, output: str, t_failed: float | None, results: Path) -> str:
    """The run exited with its own code after one line naming a file of `results`, and the simulator received no
    request more than a second after that line; the line."""
    assert proc.returncode == EXIT_WRITE_FAILED, output[-3000:]
    said = [line for line in output.splitlines() if "cannot write " in line and "/ERROR/" in line]
    assert len(said) == 1 and "Traceback" not in output, output[-3000:]  # (the final table lists it as a warning)
    assert f"cannot write {results}" in said[0] and f"(exit code {EXIT_WRITE_FAILED})" in said[0], said
    assert t_failed is not None
    last_recv_s = max(record["t_recv"] for record in sim.trace())
    assert last_recv_s < t_failed + 1.0, (last_recv_s, t_failed)  # one host: both perf_counter (CLOCK_MONOTONIC)
    assert f"Shutting down (exit code {EXIT_WRITE_FAILED})" in output
    return said[0]


def test_a_full_disk_stops_the_load_and_keeps_whole_files(sim, tiny_disk):
    sim.reset()
    results = tiny_disk / "run"
    t0 = time.perf_counter()
    proc = start(sim, results)
    output, t_failed = read_until_exit(proc)
    assert time.perf_counter() - t0 < RUN_S / 2, output[-3000:]
    line = check_stopped(sim, proc, output, t_failed, results)
    assert "No space left on device" in line
    assert not list(results.glob("*.tmp"))  # an atomic write that failed leaves no temp file
    summary_file = results / "summary.json"
    if summary_file.exists():  # whole: the final one, or the last snapshot before the disk filled
        summary = json.loads(summary_file.read_text())
        assert summary["status"] in ("complete", "incomplete")
        if summary["status"] == "complete":
            assert (
                summary["verdict"]["exit_code"] == EXIT_WRITE_FAILED
                and line.split("ERROR/llm_locust: ")[-1] in (summary["warnings"])
            )
    for text in (results / "requests.jsonl").read_text().splitlines():  # at its last whole line
        assert json.loads(text)["outcome"] == "ok"


def test_a_removed_results_folder_stops_the_load(sim, tmp_path):
    sim.reset()
    results = tmp_path / "run"
    proc = start(sim, results)
    deadline = time.monotonic() + 30
    while not (results / "llm_timeseries.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)  # requests flowing
    shutil.rmtree(results)
    t_removed = time.perf_counter()
    output, t_failed = read_until_exit(proc)
    line = check_stopped(sim, proc, output, t_failed, results)
    assert "the results folder was removed" in line
    assert t_failed - t_removed < 2.5  # checked every second
    assert not results.exists()  # not made again with part of the files
