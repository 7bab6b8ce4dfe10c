"""Load models, pure parts: arrival processes, sweep steps, shares across workers, plans."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from harness.stats import ks_exponential

from llm_locust.errors import ConfigError
from llm_locust.load.arrivals import (
    ArrivalProcess,
    Step,
    integer_shares,
    parse_number_list,
    sweep_steps,
    worker_shares,
)
from llm_locust.load.pacing import Plan


def gaps(kind: str, rate: float, n: int, burstiness: float = 1.0, seed: int = 1) -> np.ndarray:
    process = ArrivalProcess(rate, kind, burstiness, 100.0, random.Random(seed))  # type: ignore[arg-type]
    return np.diff([process.next_s() for _ in range(n + 1)])


def test_poisson_gaps_are_exponential_at_the_rate() -> None:
    g = gaps("poisson", 20.0, 20_000)
    assert abs(g.mean() - 1 / 20) < 0.002
    assert ks_exponential(g, 20.0) < 1.63 / math.sqrt(len(g))  # KS critical value, alpha = 0.01


def test_constant_and_gamma_gaps() -> None:
    assert np.allclose(gaps("constant", 4.0, 100), 0.25)
    bursty, regular = gaps("gamma", 10.0, 20_000, 0.25), gaps("gamma", 10.0, 20_000, 4.0)
    for g in (bursty, regular):
        assert abs(g.mean() - 0.1) < 0.005
    # coefficient of variation of Gamma(k) is 1/sqrt(k): 2 for k = 0.25, 0.5 for k = 4
    assert abs(bursty.std() / bursty.mean() - 2.0) < 0.15
    assert abs(regular.std() / regular.mean() - 0.5) < 0.05


def test_seeded_arrivals_repeat() -> None:
    assert np.array_equal(gaps("poisson", 5.0, 50, seed=7), gaps("poisson", 5.0, 50, seed=7))


def test_sweep_steps() -> None:
    steps = sweep_steps([1, 4], [], 256, 10.0, 2.0)
    assert steps == (Step(0, 1, None, 10.0, 2.0), Step(1, 4, None, 10.0, 2.0))
    assert [s.label for s in steps] == ["users=1", "users=4"]
    rates = sweep_steps([], [0.5, 2.0], 64, 10.0, 0.0)
    assert [(s.users, s.rate_per_s, s.label) for s in rates] == [(64, 0.5, "rate=0.5/s"), (64, 2.0, "rate=2/s")]
    assert sweep_steps([], [], 8, 10.0, 0.0) == ()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_number_list("--sweep-users", "1,x", int), "'x' is not a int"),
        (lambda: parse_number_list("--sweep-rates", "1,-2", float), "every value must be > 0"),
        (lambda: sweep_steps([1], [1.0], 8, 10.0, 0.0), "exclude each other"),
        (lambda: sweep_steps([1], [], 8, 0.0, 0.0), "--step-duration-s must be > 0"),
        (lambda: sweep_steps([1], [], 8, 10.0, 10.0), "--warmup-s must be >= 0 and shorter"),
    ],
)
def test_bad_sweeps_name_the_option(call, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        call()


def test_shares_follow_the_users_and_add_up() -> None:
    assert worker_shares(10.0, {"a": 3, "b": 1}) == {"a": 7.5, "b": 2.5}
    assert worker_shares(10.0, {"a": 0, "b": 0}) == {"a": 5.0, "b": 5.0}
    assert worker_shares(10.0, {"a": 2, "b": 0}) == {"a": 10.0, "b": 0.0}
    for total in range(0, 40):
        shares = integer_shares(total, {"a": 3, "b": 3, "c": 1})
        assert sum(shares.values()) == total and max(shares["a"], shares["b"]) - min(shares["a"], shares["b"]) <= 1


def test_plan_round_trips_the_wire() -> None:
    plan = Plan(Step(2, 8, 1.5, 30.0, 5.0), 0.75, 12, 4.2, "gamma", 0.5, 1001)
    assert Plan.from_wire(plan.to_wire()) == plan
    assert Plan.from_wire(Plan().to_wire()) == Plan()


def test_limits_name_the_first_reason_to_end_the_run() -> None:
    """The stop conditions, in order: the trace all sent, --max-requests, a command that cannot work (every request
    failed with one configuration-class error, none succeeded), --abort-error-rate once `ABORT_MIN_REQUESTS`
    finished."""
    from llm_locust.load.limits import ABORT_MIN_REQUESTS, Limits

    assert Limits().stop_reason(10_000, 0, {"http_5xx": 10_000}) is None  # no limit set
    trace = Limits(trace_requests=50, max_requests=60)
    assert trace.stop_reason(49, 49, {}) is None
    assert trace.stop_reason(50, 50, {}) == "the trace's 50 requests were sent"
    assert Limits(max_requests=40).stop_reason(40, 40, {}) == "--max-requests 40 reached"
    assert Limits().stop_reason(3, 0, {"tls": 3}) == (
        "the server's TLS set-up does not match the command (certificate or URL scheme)"
    )
    assert Limits().stop_reason(3, 1, {"tls": 2}) is None  # one succeeded: a later request may too
    abort = Limits(abort_error_rate=0.5)
    too_few = ABORT_MIN_REQUESTS - 1
    assert abort.stop_reason(too_few, 0, {"http_5xx": too_few}) is None  # too few to judge
    assert abort.stop_reason(20, 10, {"http_5xx": 10}) is None  # 50 %: not above
    assert abort.stop_reason(20, 9, {"http_5xx": 11}) == "error rate 55% exceeded --abort-error-rate 0.5"


def test_a_pause_after_a_step_is_over_when_its_requests_finished_or_its_time_is_up() -> None:
    """`drain_over`: not before `min_s` (every worker reported since), then as soon as nothing is in flight; at
    `max_s` whatever is still in flight."""
    from llm_locust.load.limits import drain_over

    assert not drain_over(0.5, 0, min_s=1.0, max_s=10.0)  # too early to know: reports may still come
    assert drain_over(1.0, 0, min_s=1.0, max_s=10.0)
    assert not drain_over(5.0, 3, min_s=1.0, max_s=10.0)  # requests still in flight
    assert drain_over(10.0, 3, min_s=1.0, max_s=10.0)  # long enough: those are left out
