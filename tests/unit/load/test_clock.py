"""The run's clock (load/clock.py): a worker's offset from round trips — the true offset always inside the bound, the
shortest recent round trip kept —, the process's reading of the master's clock, summary.json's `clocks` and its
warnings."""

from __future__ import annotations

import random
import time

import pytest

from llm_locust.load.clock import (
    KEEP_SAMPLES,
    PRECISION_S,
    Offset,
    OffsetEstimator,
    RunClock,
    offset_warnings,
    offsets_summary,
)


def round_trip(skew_s: float, t_master_s: float, out_s: float, back_s: float) -> tuple[float, float, float]:
    """One ping of a worker whose clock is `skew_s` ahead: its send and receive times on its clock, the master's
    reading `t_master_s` (the ping took `out_s` to reach the master, the answer `back_s` to come back)."""
    return (t_master_s - out_s + skew_s, t_master_s + back_s + skew_s, t_master_s)


def test_nothing_measured_yet():
    assert OffsetEstimator().best is None


def test_a_symmetric_round_trip_gives_the_offset_exactly():
    offset = OffsetEstimator().add(*round_trip(3.0, 1_700_000_000.0, 0.0002, 0.0002))
    assert offset is not None
    assert offset.offset_s == pytest.approx(3.0, abs=1e-6) and offset.uncertainty_s == pytest.approx(0.0002, abs=1e-6)


def test_the_true_offset_is_always_within_the_uncertainty_of_the_best():
    """Legs of any lengths, however lopsided (a busy master, a busy worker): the offset is off by at most its
    uncertainty, and the kept sample is the one with the shortest round trip."""
    rng = random.Random(7)
    for skew_s in (-2.0, -0.0004, 0.0, 3.0, 86_400.5):
        estimator = OffsetEstimator()
        shortest_s = float("inf")
        for i in range(KEEP_SAMPLES):
            out_s, back_s = rng.expovariate(1 / 0.0003), rng.expovariate(1 / 0.002)  # lopsided on purpose
            shortest_s = min(shortest_s, out_s + back_s)
            best = estimator.add(*round_trip(skew_s, 1_700_000_000.0 + i, out_s, back_s))
            assert best is not None
            assert abs(best.offset_s - skew_s) <= best.uncertainty_s + 1e-6
        assert best.uncertainty_s == pytest.approx(shortest_s / 2, abs=1e-6)


def test_only_recent_round_trips_count():
    """A short round trip long ago gives way once `keep` newer ones came (the clocks may have drifted since)."""
    estimator = OffsetEstimator(keep=3)
    estimator.add(*round_trip(1.0, 100.0, 0.0001, 0.0001))
    for i in range(3):
        best = estimator.add(*round_trip(1.005, 200.0 + i, 0.001, 0.001))
    assert best is not None and best.offset_s == pytest.approx(1.005) and best.uncertainty_s == pytest.approx(0.001)


def test_a_round_trip_whose_answer_came_before_its_ping_is_left_out():
    """The worker's clock stepped back between its ping and the answer: nothing can be said."""
    estimator = OffsetEstimator()
    assert estimator.add(10.0, 9.0, 5.0) is None
    good = estimator.add(*round_trip(0.5, 20.0, 0.0001, 0.0001))
    assert estimator.add(30.0, 29.999, 20.0) == good


def test_an_offset_crosses_the_wire_as_it_is():
    offset = Offset(-2.000123, 0.000187)
    assert Offset.from_wire(offset.to_wire()) == offset


def test_the_run_clock_reads_the_masters_time():
    """Unmeasured (a master, a local runner, a worker before its first answer): its own wall clock. Measured: its own
    minus the offset; `perf_at` maps an epoch second of the master's to this process's perf_counter."""
    clock = RunClock()
    assert clock.offset is None and clock.offset_s == 0.0
    assert abs(clock.now_s() - time.time()) < 0.01
    clock.offset = Offset(3.0, 0.0001)
    assert abs(clock.now_s() - (time.time() - 3.0)) < 0.01
    master_now_s = time.time() - 3.0
    assert abs(clock.perf_at(master_now_s + 10.0) - (time.perf_counter() + 10.0)) < 0.01


def test_summary_lists_each_workers_offset_in_ms():
    by_worker = {"w2": Offset(-2.0000094, 0.000181), "w1": Offset(3.000004, 0.000193), "w3": None}
    assert offsets_summary(by_worker) == {
        "by_worker": {
            "w1": {"offset_ms": 3000.004, "uncertainty_ms": 0.193},
            "w2": {"offset_ms": -2000.009, "uncertainty_ms": 0.181},
            "w3": None,
        },
        "precision_ms": PRECISION_S * 1e3,
    }
    assert offsets_summary({}) is None  # a local run: one clock


def test_warnings_only_for_offsets_not_known_to_the_precision_claimed():
    healthy = {"w1": Offset(3.0, 0.0002), "w2": Offset(-2.0, PRECISION_S)}
    assert offset_warnings(healthy) == ()
    loose = offset_warnings({**healthy, "w3": Offset(0.1, 0.0042)})
    assert loose == (
        "the clock offset of 1 worker(s) is known only to w3 ±4.2 ms (half the shortest round trip to the master), "
        "more than the 1 ms the results claim: their send times, request lines and time-series windows may be off "
        "by that much",
    )
    (never,) = offset_warnings({**healthy, "w4": None})
    assert never.startswith("the clock offset of 1 worker(s) was never measured: w4;")


def test_a_warning_names_a_few_workers_the_loosest_first():
    by_worker = {f"w{i:02d}": Offset(0.0, 0.001 + i / 1e4) for i in range(1, 13)}
    (warning,) = offset_warnings({**by_worker, "w00": Offset(0.0, 0.0001)})
    assert warning.startswith(
        "the clock offset of 12 worker(s) is known only to w12 ±2.2 ms, w11 ±2.1 ms, w10 ±2.0 ms, w09 ±1.9 ms, "
        "w08 ±1.8 ms and 7 more (half the shortest round trip to the master)"
    )
