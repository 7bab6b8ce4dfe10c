"""Client saturation: CPU share and gevent loop lag measured in the process running users, warned about."""

from __future__ import annotations

import time

import gevent
from conftest import options, read_summary, run_local

from llm_locust.runtime.saturation import CPU_WARN_PCT, LAG_WARN_MS, LoopMonitor, SaturationTracker


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


def test_tracker_keeps_peaks_and_warns_once_per_process():
    tracker = SaturationTracker()
    tracker.add("worker a", {"cpu_pct": 40.0, "lag_p99_ms": 1.0, "lag_max_ms": 2.0}, 0.0)
    assert tracker.warnings == []
    tracker.add("worker a", {"cpu_pct": CPU_WARN_PCT + 5, "lag_p99_ms": 3.0, "lag_max_ms": 9.0}, 0.0)
    tracker.add("worker a", {"cpu_pct": 99.0, "lag_p99_ms": LAG_WARN_MS + 1, "lag_max_ms": 30.0}, 0.0)
    tracker.add("worker b", {"cpu_pct": 10.0, "lag_p99_ms": LAG_WARN_MS + 5, "lag_max_ms": 40.0}, 0.0)
    tracker.add("worker c", None, 0.0)  # a report without a sample (an older worker)
    assert len(tracker.warnings) == 2
    assert "worker a at 95 % CPU" in tracker.warnings[0] and "--processes" in tracker.warnings[0]
    assert "worker b" in tracker.warnings[1]
    assert tracker.as_dict()["processes"]["worker a"] == {"cpu_pct_max": 99.0, "lag_p99_ms_max": 21.0,
                                                          "lag_max_ms": 30.0}  # fmt: skip


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
    try:
        run_local(options("--host", fast_sim.url, "--results-dir", str(busy_dir)), users=2, seconds=4.5)
    finally:
        hogger.kill()
    busy = read_summary(busy_dir)
    assert any(w.startswith("client saturated: local") for w in busy["warnings"])
    assert busy["client"]["processes"]["local"]["lag_max_ms"] >= 30  # the hog holds the loop 100 ms at a time
