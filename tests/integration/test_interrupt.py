"""Nothing lost: real `locust` processes stopped by real signals leave a valid, marked-incomplete results folder."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gevent
import pytest
from conftest import LOCUSTFILE, ROOT, free_port, read_summary

from llm_locust.metrics.gates import EXIT_GATE_FAILED, EXIT_INTERRUPTED
from llm_locust.runtime.interrupt import SignalWatch

STOP_WAIT_S = 60
"""How long to wait for a signalled run to end: a wait for a loaded machine, no bound the test asserts (a run that did
not stop would end only at its 120 s, `incomplete` not in its summary)."""
EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(: .*)?$")


def start_locust(sim_url: str, results: Path, *extra: str) -> subprocess.Popen[str]:
    """A headless `locust` run of 120 s (far longer than any test lets it go: a stop by a signal is seen in the
    summary's status, `incomplete`, not in how long the run took).

    With --processes, master and workers meet on a free port: on Locust's default port, workers
    of another run on the same machine could join this master.
    """
    if "--processes" in extra:
        port = str(free_port())
        extra = (*extra, "--master-bind-port", port, "--master-port", port)
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "4", "-r", "4",
        "--run-time", "120s", "--host", sim_url, "--model", "llm-locust-sim", "--max-tokens", "16",
        "--ignore-eos", "--interval-s", "1", "--csv", str(results / "locust"), *extra,
    ]  # fmt: skip
    return subprocess.Popen(  # its own process group, as in a terminal of its own
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def wait_for_requests(results: Path, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    """Until Locust's stats history shows completed requests (the load is really running)."""
    deadline = time.monotonic() + timeout_s
    history = results / "locust_stats_history.csv"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        if history.exists():
            with history.open() as f:
                if any(
                    r["Name"] == "Aggregated" and int(r["Total Request Count"] or 0) > 20 for r in csv.DictReader(f)
                ):
                    return
        time.sleep(0.2)
    raise AssertionError("the load did not start")


def children(pid: int) -> list[int]:
    """Direct child process ids of `pid` (Linux /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def check_incomplete(results: Path, output: str) -> dict:
    """The results folder is complete in form, marked incomplete, and holds measured data."""
    summary = read_summary(results)
    assert summary["status"] == "incomplete", output[-3000:]
    assert summary["throughput"]["requests_ok"] > 0
    assert summary["metrics"]["ttft_ms"]["count"] == summary["throughput"]["requests_ok"]
    with (results / "llm_timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows and sum(int(r["requests_ok"]) for r in rows) == summary["throughput"]["requests_ok"]
    assert (results / "locust_stats.csv").stat().st_size > 0
    assert not list(results.glob("*.tmp"))
    for traceback in output.split("Traceback")[1:]:  # gevent prints one if Ctrl-C lands in a greenlet
        # its exception line: the first "Name" or "Name: message" line (other processes' lines may come in between)
        raised = next((line for line in traceback.splitlines()[1:] if EXCEPTION_LINE.match(line)), "")
        assert raised == "KeyboardInterrupt", traceback[:2500]
    assert "INCOMPLETE" in output
    return summary


def check_interrupted(summary: dict, signum: signal.Signals, code: int, output: str) -> None:
    """The run says it was interrupted, by which signal, with its own exit code; no worker counted lost."""
    name = signal.Signals(signum).name
    assert code == EXIT_INTERRUPTED, output[-3000:]
    assert summary["run"]["interrupted"] == name and summary["run"]["workers_lost"] == []
    assert summary["verdict"]["reasons"] == [f"interrupted by {name}"], summary["verdict"]
    assert summary["verdict"]["exit_code"] == EXIT_INTERRUPTED
    assert any(f"interrupted by {name}" in w for w in summary["warnings"])
    assert f"exit code {EXIT_INTERRUPTED}" in output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_a_local_run_leaves_incomplete_results(fast_sim, tmp_path, signum):
    proc = start_locust(fast_sim.url, tmp_path)
    wait_for_requests(tmp_path, proc)
    proc.send_signal(signum)
    output, _ = proc.communicate(timeout=STOP_WAIT_S)
    summary = check_incomplete(tmp_path, output)
    check_interrupted(summary, signum, proc.returncode, output)


@pytest.mark.parametrize("ctrl_c", [False, True], ids=["sigterm-master", "ctrl-c-process-group"])
def test_stopping_locust_processes(fast_sim, tmp_path, ctrl_c):
    """SIGTERM to the master of `locust --processes 2`, or Ctrl-C in its terminal (SIGINT to all)."""
    proc = start_locust(fast_sim.url, tmp_path, "--processes", "2")
    wait_for_requests(tmp_path, proc)
    workers = children(proc.pid)
    assert len(workers) == 2
    if ctrl_c:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=STOP_WAIT_S)
    summary = check_incomplete(tmp_path, output)
    assert summary["run"]["role"] == "master"
    check_interrupted(summary, signal.SIGINT if ctrl_c else signal.SIGTERM, proc.returncode, output)
    # the workers' last reports were collected before the results were written: nothing lost
    with (tmp_path / "locust_stats.csv").open() as f:
        post = next(r for r in csv.DictReader(f) if r["Name"] == "/v1/chat/completions")
    assert summary["throughput"]["requests_ok"] == int(post["Request Count"]) - int(post["Failure Count"])
    for pid in workers:  # no worker left behind
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_sigterm_to_one_worker_of_locust_processes(fast_sim, tmp_path):
    proc = start_locust(fast_sim.url, tmp_path, "--processes", "2", "--run-time", "6s")
    wait_for_requests(tmp_path, proc)
    workers = children(proc.pid)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGTERM)
    output, _ = proc.communicate(timeout=40)  # the run goes on with the other worker to its end
    summary = check_incomplete(tmp_path, output)
    assert len(summary["run"]["workers_lost"]) == 1
    assert any("stopped reporting" in w for w in summary["warnings"])
    # the master was not interrupted: a lost worker fails the verdict, with the gate-failure code
    assert summary["run"]["interrupted"] is None
    assert summary["verdict"]["reasons"] == [f"worker lost: 1 worker(s) stopped reporting ({workers_lost(summary)})"]
    assert proc.returncode == EXIT_GATE_FAILED


def workers_lost(summary: dict) -> str:
    return ", ".join(summary["run"]["workers_lost"])


def test_sigkill_of_the_master_leaves_the_last_snapshot(fast_sim, tmp_path):
    """Even a master killed without a chance to react leaves a valid summary.json (a snapshot)."""
    proc = start_locust(fast_sim.url, tmp_path)
    wait_for_requests(tmp_path, proc)
    deadline = time.monotonic() + 20
    while not (tmp_path / "summary.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.kill()
    proc.communicate(timeout=10)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "incomplete"
    assert summary["throughput"]["requests_ok"] > 0


def test_an_interrupted_runs_duration_ends_at_the_signal(fast_sim, tmp_path):
    """SIGTERM ~4 s into the load of `locust --processes 2`: the run's duration ends at the signal, not once the
    workers' last reports were in and summary.json written (it was 5.2 s for 4.0 s: 1.2 s too long).

    It starts at the test's start (docs/results.md), which the master logs with its results folder, to the
    millisecond; the first request reaches the server after it — by 0.6 s on a loaded machine, where the workers
    take that long to start their users — so the load the server saw is a lower bound only."""
    fast_sim.reset()  # its trace: this run's requests only
    proc = start_locust(fast_sim.url, tmp_path, "--processes", "2")
    wait_for_requests(tmp_path, proc)
    time.sleep(2.0)
    t_signal = time.perf_counter()  # the simulator's t_recv is perf_counter too (one monotonic clock per machine)
    t_signal_epoch_s = time.time()
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=STOP_WAIT_S)
    assert proc.returncode == EXIT_INTERRUPTED, output[-3000:]
    started = [r["t_recv"] for r in fast_sim.trace() if r.get("t_recv") is not None]
    load_s = t_signal - min(started)
    duration_s = read_summary(tmp_path)["run"]["duration_s"]
    assert duration_s >= load_s - 0.01, (duration_s, load_s)
    # the writer's start, logged just after it is taken: its end as logged can only be later than the real one
    t_end_epoch_s = logged_epoch_s(output, "LLM results will be written to") + duration_s
    assert -0.01 <= t_end_epoch_s - t_signal_epoch_s < 0.5, (t_end_epoch_s - t_signal_epoch_s, output[-3000:])


def logged_epoch_s(output: str, message: str) -> float:
    """When Locust's log (`[%Y-%m-%d %H:%M:%S,mmm] host/LEVEL/logger: message`, local time) printed `message`."""
    line = next(line for line in output.splitlines() if message in line)
    stamp = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]", line)
    assert stamp is not None, line
    return time.mktime(time.strptime(stamp[1], "%Y-%m-%d %H:%M:%S")) + int(stamp[2]) / 1000


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="SIGINT reaches the main thread")
def test_ctrl_c_in_a_greenlet_lands_once_it_yields_in_the_main_greenlet():
    """A Ctrl-C that arrives while a greenlet works (the results writer between taking a time-series window and
    writing its row) lets that work finish; the KeyboardInterrupt reaches the main greenlet, where Locust stops."""
    watch = SignalWatch()
    watch.start()
    steps: list[str] = []

    def work() -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler at the next bytecode
        steps.extend(["window taken", "row written"])

    try:
        worker = gevent.spawn(work)
        with pytest.raises(KeyboardInterrupt):
            worker.join()
            gevent.sleep(1)  # (the KeyboardInterrupt arrives before this ends)
    finally:
        watch.stop()
    assert worker.successful() and steps == ["window taken", "row written"], (worker.exception, steps)
    assert watch.name == "SIGINT"
