"""Orphaned workers stop: `locust` worker processes whose master is killed (kill -9) stop loading the endpoint within
5 s, say why in one line and exit (runtime/master_watch.py; the decision is load/master_link.py's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import LOCUSTFILE, ROOT, free_port, wait_for

from llm_locust.runtime.master_watch import EXIT_MASTER_GONE

STOP_WITHIN_S = 5.0


def locust(*args: str) -> subprocess.Popen[str]:
    """A `locust` process with the chat locustfile and `args`, its output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args],
        cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def test_workers_stop_their_load_within_5_s_of_a_killed_master(fast_sim, tmp_path: Path):
    port = str(free_port())
    master = locust(
        "--master", "--headless", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
        "--expect-workers", "2", "-u", "4", "-r", "4", "--run-time", "60s", "--host", fast_sim.url,
        "--model", "llm-locust-sim", "--max-tokens", "8", "--results-dir", str(tmp_path / "results"),
    )  # fmt: skip
    workers = [locust("--worker", "--master-host", "127.0.0.1", "--master-port", port) for _ in range(2)]
    try:
        fast_sim.reset()
        wait_for(lambda: len(fast_sim.trace()) > 40, 60, "the load to run")
        master.kill()  # SIGKILL: no "quit" reaches the workers
        t_kill = time.monotonic()
        master.wait(10)
        counts = [(0.0, len(fast_sim.trace()))]
        while time.monotonic() - t_kill < STOP_WITHIN_S + 5:
            time.sleep(0.25)
            counts.append((time.monotonic() - t_kill, len(fast_sim.trace())))
        last_growth_s = max(t for (t, n), (_, before) in zip(counts[1:], counts, strict=False) if n != before)
        figures = f"count at the kill {counts[0][1]}, after {counts[-1][0]:.1f} s {counts[-1][1]}; " \
                  f"last growth {last_growth_s:.2f} s after the kill"  # fmt: skip
        print(figures)
        assert last_growth_s <= STOP_WITHIN_S, figures
        for worker in workers:
            worker.wait(15)  # the process exits, it does not hang
            output = worker.stdout.read() if worker.stdout else ""
            assert worker.returncode == EXIT_MASTER_GONE, output[-3000:]
            said = [line for line in output.splitlines() if f"the master 127.0.0.1:{port} is gone (" in line]
            assert len(said) == 1, output[-3000:]
            assert "this worker stops its load and quits (exit code 1)" in said[0]
            assert "Traceback" not in output, output[-3000:]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
