"""The client's error budget (`metrics.client_error`), pure units: the bound against streams whose true arrival times
are known and whose reads come late as a client's do (merged reads, late sends), and its place in the verdict (the
real runs against the simulator's write times: tests/integration/test_client_error_runs.py)."""

import random
from itertools import pairwise

import pytest

from llm_locust.metrics.client_error import (
    CONVERSION_MS,
    REMEDY,
    REMEDY_MACHINE,
    ClientTiming,
    client_error,
    client_error_line,
    limited_reason,
)
from llm_locust.metrics.gates import EXIT_CLIENT_LIMITED, EXIT_GATE_FAILED, EXIT_INTERRUPTED, exit_code, verdict
from llm_locust.metrics.hdr import quantiles
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.sections import metric_stats, throughput


def stream(rng: random.Random, t_send: float, upload_s: float, read_delay_s) -> tuple[RequestRecord, RequestRecord]:
    """One request of 64 tokens as the client records it and as it truly was: the server gets it within `upload_s`
    of `t_send`; each read comes `read_delay_s()` after the first unread token arrived and takes every token arrived
    by then, all with the newest one's (kernel) time."""
    t_server = t_send + upload_s * rng.random()
    arrivals = [t_server + 0.02 + rng.uniform(0, 0.01)]
    for _ in range(63):
        arrivals.append(arrivals[-1] + rng.uniform(0.002, 0.008))
    recorded, i = [], 0
    while i < len(arrivals):
        read_at = arrivals[i] + read_delay_s()
        j = i
        while j + 1 < len(arrivals) and arrivals[j + 1] <= read_at:
            j += 1
        recorded += [arrivals[j]] * (j - i + 1)
        i = j + 1
    measured, truth = RequestRecord("chat", t_send=t_send), RequestRecord("chat", t_send=t_server)
    measured.t_uploaded = t_send + upload_s
    truth.t_uploaded = t_server
    for record, times in ((measured, recorded), (truth, arrivals)):
        record.t_first = record.t_first_content = times[0]
        record.t_last = times[-1]
        record.itl_us.extend(round((b - a) * 1e6) for a, b in pairwise(times))
        record.events = record.usage_completion_tokens = len(times)
    return measured, truth


def run(seed: int, delay_s, upload_s: float, requests: int = 400) -> tuple[WindowMetrics, WindowMetrics, list[float]]:
    """The client's window, the truth's, and every read delay drawn."""
    rng = random.Random(seed)
    delays: list[float] = []

    def draw() -> float:
        delays.append(delay_s(rng))
        return delays[-1]

    measured, truth = WindowMetrics(), WindowMetrics()
    for n in range(requests):
        m, t = stream(rng, n * 0.01, upload_s, draw)
        measured.add(m)
        truth.add(t)
    return measured, truth, delays


def timing(delays: list[float], kernel: bool = True, busy: bool = True) -> ClientTiming:
    """The loop lag a monitor would report of these read delays: their p99 and largest, ms."""
    ordered = sorted(delays)
    return ClientTiming(kernel, 1e3 * ordered[int(0.99 * len(ordered))], 1e3 * ordered[-1], busy)


IDLE = (lambda rng: rng.uniform(0, 5e-5), 1e-4)  # reads within 50 µs, uploads within 0.1 ms
OVERLOADED = (lambda rng: rng.expovariate(1 / 0.006), 2e-3)  # reads 6 ms late on average: many merged


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("load", "kernel"), [(IDLE, True), (OVERLOADED, True), (IDLE, False), (OVERLOADED, False)])
def test_the_bound_holds_the_error_of_every_percentile(seed, load, kernel):
    """Idle and overloaded clients, with kernel times or by the loop's lag alone: each bounded percentile of the
    client's histograms lies within its bound of the truth's (TTFT and E2E only above it)."""
    measured, truth, delays = run(seed, *load)
    budget = client_error(measured, timing(delays, kernel), max_ms=1.0)
    for name in ("ttft", "itl", "e2e"):
        for key in ("p50", "p99"):
            p = float(key[1:])
            error_ms = (quantiles(measured.hist[name], (p,))[0] - quantiles(truth.hist[name], (p,))[0]) / 1e3
            bound = budget[f"{name}_ms"][key]
            assert abs(error_ms) <= bound, (name, key, error_ms, budget)
            if name != "itl":
                assert error_ms >= -CONVERSION_MS, (name, key, error_ms)


def test_an_idle_client_is_within_a_tenth_of_a_millisecond_and_not_limited():
    measured, _truth, delays = run(0, *IDLE)
    budget = client_error(measured, timing(delays), max_ms=1.0)
    assert budget["zero_gaps"] == 0 and not budget["limited"] and budget["remedy"] is None
    assert budget["itl_ms"]["p99"] < 0.05 and budget["ttft_ms"]["p99"] < 0.5, budget
    assert "within --max-client-error-ms 1 on ITL p99" in client_error_line(budget)


def test_an_overloaded_client_is_limited_with_the_remedy():
    measured, _truth, delays = run(0, *OVERLOADED)
    budget = client_error(measured, timing(delays), max_ms=1.0)
    assert budget["zero_gaps"] > 1000 and budget["limited"] and budget["remedy"] == REMEDY
    assert budget["itl_ms"]["p99"] > 1.0, budget
    assert "CLIENT LIMITED: add processes" in client_error_line(budget)
    # the same delays at low CPU: the machine's other processes took it, and more processes would not help
    assert client_error(measured, timing(delays, busy=False), max_ms=1.0)["remedy"] == REMEDY_MACHINE


def test_zero_gaps_the_server_wrote_together_do_not_limit_a_client_whose_loop_was_on_time():
    """Events written together by the server also leave gaps at 0: with a loop lag of 0.1 ms the lag's bound, the
    smaller, holds."""
    measured, _truth, _delays = run(0, *IDLE)
    for _ in range(5000):
        measured.hist["itl"].record_value(0)
    budget = client_error(measured, ClientTiming(True, 0.05, 0.1), max_ms=1.0)
    assert not budget["limited"] and budget["itl_ms"]["p99"] < 0.2, budget
    assert client_error(measured, ClientTiming(True, 5.0, 20.0), max_ms=1.0)["limited"]


def test_what_the_client_did_not_measure_has_no_bound():
    """The openai SDK sees no socket (no upload time): no TTFT nor E2E bound; without kernel times nor a loop-lag
    sample, no ITL bound either — and no verdict on what was not measured."""
    measured, _truth, _delays = run(0, *IDLE, requests=20)
    del measured.hist["upload"]
    budget = client_error(measured, ClientTiming(False, None, None), max_ms=1.0)
    assert [budget[k] for k in ("ttft_ms", "itl_ms", "e2e_ms")] == [{"p50": None, "p99": None}] * 3
    assert not budget["limited"]
    assert "TTFT not measured" in client_error_line(budget)


def test_a_limited_client_fails_the_verdict_with_its_own_exit_code():
    measured, _truth, delays = run(0, *OVERLOADED, requests=100)
    summary = {
        "run": {"interrupted": None},
        "metrics": metric_stats(measured),
        "throughput": throughput(measured, 10.0),
        "client_error": client_error(measured, timing(delays), max_ms=1.0),
    }
    result = verdict(summary, max_error_rate=0.01)
    assert not result["passed"] and result["client_limited"] and result["exit_code"] == EXIT_CLIENT_LIMITED
    assert result["reasons"][0].startswith("client limited: the client can have moved ITL p99 by up to ")
    assert result["reasons"][0].endswith(REMEDY)
    summary["client_error"] = client_error(measured, timing(delays), max_ms=1e6)
    assert verdict(summary, max_error_rate=0.01)["passed"]


def test_exit_code_order():
    assert exit_code(True, False, False) == 0
    assert exit_code(False, True, True) == EXIT_INTERRUPTED
    assert exit_code(False, False, True) == EXIT_CLIENT_LIMITED
    assert exit_code(False, False, False) == EXIT_GATE_FAILED


def test_without_a_limit_the_budget_is_stated_not_judged():
    """No --max-client-error-ms: the same bounds, but the run is never client_limited (a bound can exceed 1 ms on a
    healthy run) and the line says it was not judged."""
    measured, _truth, delays = run(0, *OVERLOADED)
    judged, stated = client_error(measured, timing(delays), max_ms=1.0), client_error(measured, timing(delays), None)
    assert judged["limited"] and not stated["limited"] and stated["remedy"] is None and stated["max_ms"] is None
    for key in ("ttft_ms", "itl_ms", "e2e_ms"):
        assert stated[key] == judged[key]
    assert "not judged (no --max-client-error-ms)" in client_error_line(stated)
    assert limited_reason(stated) is None
