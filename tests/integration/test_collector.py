"""The garbage collector in processes running users: off while a test runs, a full collection on
schedule (llm_locust.runtime.gc_policy), automatic again after the test."""

from __future__ import annotations

import gc
import weakref

import gevent
from conftest import options, read_summary, run_local

from llm_locust.runtime.gc_policy import RunCollector


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_run_collector_frees_cycles_on_schedule_only():
    collector = RunCollector(interval_s=0.2)
    collector.start()
    try:
        assert not gc.isenabled()
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # cyclic garbage: only a collection frees it
        alive = weakref.ref(a)
        del a, b
        for _ in range(2000):  # allocations that would trigger automatic collections
            _Node()
        assert alive() is not None
        gevent.sleep(0.5)  # the scheduled full collection
        assert alive() is None
    finally:
        collector.stop()
    assert gc.isenabled()
    gc.unfreeze()


def test_a_test_runs_without_automatic_collection(fast_sim, tmp_path):
    seen: list[bool] = []

    def sample() -> None:
        while True:
            seen.append(gc.isenabled())
            gevent.sleep(0.1)

    sampler = gevent.spawn_later(0.3, sample)
    try:
        run_local(options("--host", fast_sim.url, "--results-dir", str(tmp_path)), users=4, seconds=1.5)
    finally:
        sampler.kill()
    assert seen and not any(seen)  # off all through the test
    assert gc.isenabled()  # back on once it stopped
    assert read_summary(tmp_path)["throughput"]["requests_ok"] > 0
    gc.unfreeze()
