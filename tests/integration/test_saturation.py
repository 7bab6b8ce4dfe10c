"""Client saturation: CPU share and gevent loop lag measured in the process running users; a warning only when the
process is short of CPU, a milder note for a loop stall at low CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import gevent
import pytest
from conftest import LOCUSTFILE, ROOT, options, read_summary, run_local
from gevent.monkey import get_original

from llm_locust.metrics.client_error import ClientTiming
from llm_locust.runtime.saturation import (
    CPU_WARN_PCT,
    LAG_WARN_MS,
    STARTUP_S,
    SUSTAINED_S,
    Finding,
    LoopMonitor,
    LoopSample,
    SaturationTracker,
    assess,
    judged,
)
from llm_locust.sim import run_sim

pytestmark = pytest.mark.alone  # the process's CPU share and loop lag: another test's load is what it measures

blocking_sleep = get_original("time", "sleep")  # time.sleep is gevent's under Locust: this one holds the loop


def sample(t_end_s: float, cpu_pct: float, lag_p99_ms: float, interval_s: float = 3.0) -> LoopSample:
    return LoopSample(t_end_s=t_end_s, interval_s=interval_s, cpu_pct=cpu_pct, lag_p99_ms=lag_p99_ms,
                      lag_max_ms=lag_p99_ms * 1.5)  # fmt: skip


def skip_unless_cpu_was_available(summary: dict) -> None:
    """A client that wants a whole core but gets less (other processes on a busy machine, or a simulator slower than
    it) is not short of CPU: it is not saturated (its lag, if any, is a stall), and the test of saturation cannot be
    made here: skip, saying so — when it never got clearly more than `CPU_WARN_PCT` % of a core (a CPU-bound client
    gets 97-100 %; 88-91 % is a client waiting on its simulator, on this 2-core machine), or fell under it in an
    interval (a stall: the run of busy intervals saturation needs, `SUSTAINED_S`, was broken)."""
    client = summary["client"]
    cpu_pct_max = client["processes"]["local"]["cpu_pct_max"]
    if cpu_pct_max < CPU_WARN_PCT:
        assert not client["cpu_saturated"]
    if cpu_pct_max < CPU_WARN_PCT + 5 and not client["cpu_saturated"]:
        pytest.skip(f"busy machine: the CPU-bound client got at most {cpu_pct_max:.0f} % of a core")
    if client["stalls_total"] and not client["cpu_saturated"]:
        shares = [f"{stall['cpu_pct']:.0f} %" for stall in client["stalls"]]
        pytest.skip(f"busy machine: the CPU-bound client got under {CPU_WARN_PCT:g} % of a core in {shares}")


def test_one_lagging_interval_at_low_cpu_is_a_stall_not_saturation():
    assert assess([sample(10, 6.0, 34.1)]) is Finding.STALL  # the demo's false alarm: lag at 6 % CPU
    assert assess([sample(10, 2.0, 38.4)]) is Finding.STALL  # llama.cpp at 4 users: 2 % CPU
    assert assess([sample(10, CPU_WARN_PCT - 1, LAG_WARN_MS - 0.1)]) is None
    assert assess([]) is None


def test_saturation_needs_cpu_near_one_core_sustained_with_lag():
    busy = [sample(3.0 * i, 97.0, 35.0) for i in range(1, 3)]  # 2 x 3 s = 6 s >= SUSTAINED_S
    assert sum(s.interval_s for s in busy) >= SUSTAINED_S
    assert assess(busy) is Finding.SATURATED
    assert assess(busy[-1:]) is None  # one busy interval is not sustained (nor a stall: the CPU was used)
    assert assess([sample(3, 97.0, 2.0), sample(6, 97.0, 3.0)]) is None  # busy but the loop kept up
    assert assess([sample(3, 97.0, 35.0), sample(6, 40.0, 1.0), sample(9, 97.0, 35.0)]) is None  # not consecutive
    assert assess([sample(3, 97.0, 35.0), sample(6, 99.0, 5.0)]) is Finding.SATURATED  # the lag of the run counts


def test_start_up_and_shutdown_are_not_judged():
    t0 = 1000.0
    assert not judged(sample(t0 + 3, 6.0, 80.0), t0, None)  # the first interval includes the start
    assert judged(sample(t0 + STARTUP_S + 3.1, 6.0, 80.0), t0, None)
    assert judged(sample(t0 + 20, 6.0, 80.0), t0, t0 + 20)
    assert not judged(sample(t0 + 20.5, 6.0, 80.0), t0, t0 + 20)  # ends after the stop: shutdown


def test_tracker_keeps_peaks_warns_once_and_notes_stalls():
    t0 = 1000.0
    tracker = SaturationTracker(t_start_s=t0)
    wire = {"interval_s": 3.0, "cpu_pct": 99.0, "lag_p99_ms": LAG_WARN_MS + 1, "lag_max_ms": 30.0}
    tracker.add("worker a", wire, t0 + 3)  # start-up: peaks only
    tracker.add("worker a", {**wire, "cpu_pct": 40.0, "lag_p99_ms": 1.0}, t0 + 6)
    assert tracker.warnings == [] and tracker.stalls == []
    tracker.add("worker a", {**wire, "cpu_pct": CPU_WARN_PCT + 5}, t0 + 9)
    tracker.add("worker a", wire, t0 + 12)
    tracker.add("worker a", wire, t0 + 15)  # still saturated: warned once
    tracker.add("worker b", {**wire, "cpu_pct": 10.0, "lag_p99_ms": LAG_WARN_MS + 5, "lag_max_ms": 40.0}, t0 + 9)
    tracker.add("worker c", None, t0 + 9)  # a report without a sample (an older worker)
    tracker.stop(t0 + 16)
    tracker.add("worker b", {**wire, "cpu_pct": 99.0}, t0 + 17)  # shutdown
    tracker.add("worker b", {**wire, "cpu_pct": 99.0}, t0 + 20)
    assert len(tracker.warnings) == 1 and tracker.saturated == ("worker a",)
    assert tracker.warnings[0].startswith("client saturated: worker a at 99 % CPU for 5 s or more")
    assert "--processes" in tracker.warnings[0]
    assert [(s["process"], s["lag_max_ms"]) for s in tracker.stalls] == [("worker b", 40.0)]
    assert tracker.as_dict()["processes"]["worker a"] == {"cpu_pct_max": 99.0, "lag_p99_ms_max": 21.0,
                                                          "lag_max_ms": 30.0}  # fmt: skip
    assert tracker.as_dict()["stalls_total"] == 1
    # the client's error budget reads the busiest process's lag over the whole run, start-up included
    assert tracker.timing(kernel_timestamps=True) == ClientTiming(True, LAG_WARN_MS + 5, 40.0, busy=True)


def test_timing_before_any_sample_has_no_lag_and_is_not_busy():
    tracker = SaturationTracker(t_start_s=1000.0)
    assert tracker.timing(kernel_timestamps=False) == ClientTiming(False, None, None, busy=False)
    tracker.add("local", {"interval_s": 3.0, "cpu_pct": CPU_WARN_PCT - 1, "lag_p99_ms": 0.2, "lag_max_ms": 0.4}, 1010)
    assert tracker.timing(kernel_timestamps=True) == ClientTiming(True, 0.2, 0.4, busy=False)


def test_loop_monitor_measures_a_blocked_loop():
    monitor = LoopMonitor(tick_s=0.01)
    monitor.start()
    try:
        gevent.sleep(0.1)
        quiet = monitor.take()
        gevent.sleep(0.02)
        busy_until = time.perf_counter() + 0.08
        while time.perf_counter() < busy_until:  # the loop is blocked: no greenlet runs
            pass
        gevent.sleep(0.05)
        busy = monitor.take()
    finally:
        monitor.stop()
    assert quiet["lag_p99_ms"] is not None and quiet["lag_max_ms"] < 60
    assert busy["lag_max_ms"] >= 50  # the monitor's own wake-up came ~80 ms late
    assert busy["cpu_pct"] > quiet["cpu_pct"] and busy["cpu_pct"] > 30


def test_run_reports_client_load_and_warns_when_the_loop_is_blocked(fast_sim, tmp_path):
    quiet_dir, busy_dir = tmp_path / "quiet", tmp_path / "busy"
    run_local(options("--host", fast_sim.url, "--results-dir", str(quiet_dir)), users=2, seconds=4.5)
    quiet = read_summary(quiet_dir)
    assert quiet["client"]["processes"]["local"]["cpu_pct_max"] > 0
    assert not any("client saturated" in w for w in quiet["warnings"])

    def hog() -> None:  # something in the users' process holding the CPU without yielding
        while True:
            busy_until = time.perf_counter() + 0.1
            while time.perf_counter() < busy_until:
                pass
            gevent.sleep(0.002)

    hogger = gevent.spawn(hog)
    try:  # past the start-up, two reports of 3 s at ~98 % CPU
        run_local(options("--host", fast_sim.url, "--results-dir", str(busy_dir)), users=2, seconds=10.5)
    finally:
        hogger.kill()
    busy = read_summary(busy_dir)
    skip_unless_cpu_was_available(busy)
    assert any(w.startswith("client saturated: local") for w in busy["warnings"])
    assert busy["client"]["processes"]["local"]["lag_max_ms"] >= 30  # the hog holds the loop 100 ms at a time
    assert busy["client"]["cpu_saturated"] == ["local"]
    assert any(r.startswith("client saturated: local short of CPU") for r in busy["verdict"]["reasons"])


def test_a_slow_server_at_low_load_raises_no_saturation_warning(tmp_path):
    """llama.cpp-like timing (TTFT 300 ms, 40 ms a token) at 4 users: the client idles, nothing to warn about."""
    with run_sim("--ttft-ms", "300", "--itl-ms", "40", "--output-tokens", "32") as sim:
        run_local(options("--host", sim.url, "--results-dir", str(tmp_path)), users=4, seconds=8)
    summary = read_summary(tmp_path)
    assert summary["throughput"]["requests_ok"] > 0
    assert not any("saturated" in w for w in summary["warnings"]), summary["warnings"]
    assert summary["client"]["cpu_saturated"] == [] and summary["verdict"]["passed"]


def test_a_loop_stall_at_low_cpu_is_a_note_not_a_warning(fast_sim, tmp_path):
    """A blocking call holds the loop 150 ms once, mid-run, at low CPU: a stall note naming the process, its time and
    length; no saturation warning, the verdict passes."""

    def block_once() -> None:
        gevent.sleep(5.5)  # past the start-up
        blocking_sleep(0.15)

    blocker = gevent.spawn(block_once)
    try:
        run_local(options("--host", fast_sim.url, "--results-dir", str(tmp_path)), users=1, seconds=8)
    finally:
        blocker.kill()
    summary = read_summary(tmp_path)
    assert not any("saturated" in w for w in summary["warnings"]), summary["warnings"]
    assert summary["verdict"]["passed"], summary["verdict"]
    (stall,) = summary["client"]["stalls"]
    assert stall["process"] == "local" and stall["lag_max_ms"] >= 100 and stall["cpu_pct"] < CPU_WARN_PCT
    assert stall["at"].endswith("UTC")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs sched_setaffinity and 2 cores (client on one, simulator on the other)")  # fmt: skip
def test_many_streams_on_one_core_saturate_the_client(tmp_path):
    """The `locust` CLI pinned to one core with 300 fast streams (the simulator on the other core) is short of CPU:
    the warning is given and the verdict fails on it."""
    cores = sorted(os.sched_getaffinity(0))
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "200") as sim:
        os.sched_setaffinity(sim.pid, {cores[1]})
        command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", sim.url,
                   "-u", "300", "-r", "300", "-t", "12s", "--max-tokens", "200", "--ignore-eos",
                   "--results-dir", str(tmp_path)]  # fmt: skip
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        os.sched_setaffinity(proc.pid, {cores[0]})
        try:
            output = proc.communicate(timeout=60)[0]
        finally:
            proc.kill()
    summary = read_summary(tmp_path)
    skip_unless_cpu_was_available(summary)
    assert summary["client"]["cpu_saturated"] == ["local"], (summary["client"], output[-2000:])
    assert any(w.startswith("client saturated: local") for w in summary["warnings"])
    assert proc.returncode == 3
