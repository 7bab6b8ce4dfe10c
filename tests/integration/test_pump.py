"""The stream pump: one greenlet reads every plain-TCP stream of the process (real runs, real sockets)."""

from __future__ import annotations

import pytest
from conftest import options, read_summary, run_local

from llm_locust.transport import pump
from llm_locust.transport.kernel_time import KERNEL_TIMESTAMPS

pytestmark = [
    pytest.mark.alone,  # one greenlet's reads timed against the simulator
    pytest.mark.skipif(not KERNEL_TIMESTAMPS, reason="the pump reads plain TCP on Linux only"),
]


def test_pump_reads_many_streams_and_forgets_them_when_users_stop(fast_sim, tmp_path):
    the_pump = pump.pump()
    reads_before = the_pump.reads
    opts = options("--host", fast_sim.url, "--results-dir", str(tmp_path), "--max-tokens", "16", "--ignore-eos")
    run_local(opts, users=20, seconds=2.0)  # quits while streams are being read: users killed mid-stream
    summary = read_summary(tmp_path)
    ok = summary["throughput"]["requests_ok"]
    assert ok >= 20 and summary["failures"] == {}
    assert summary["metrics"]["output_tokens"]["min"] == summary["metrics"]["output_tokens"]["max"] == 16
    assert summary["metrics"]["itl_ms"]["count"] == 15 * ok  # every gap of every request, none lost
    assert the_pump.reads - reads_before >= 16 * ok // 2  # the pump did the reading
    assert the_pump.streams == 0  # stopped users' streams were unregistered
    assert pump.pump() is the_pump  # one per process (per hub)
