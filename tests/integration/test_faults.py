"""Fault matrix: the simulator injects each fault kind at a known rate; a real Locust runner measures.

For every run the client's failure counts per kind must equal, exactly, what the simulator's
trace says it injected; successful requests' metrics must match the ground truth (faulted
requests never leak into them); the run completes.

`make test` runs the mixed matrix (every kind in one run) in a local runner and through a master
with 2 workers; the per-kind runs are `slow` (`make test-all`).
"""

from __future__ import annotations

import csv
import statistics
import time
from collections import Counter

import gevent
import pytest
from conftest import new_env, options, read_summary, run_local

from llm_locust.sim import faults, run_sim

OUTPUT_TOKENS = 16
TTFT_MS, ITL_MS = 20, 5
TIMEOUT_S = 0.5  # the client's first-token and read timeouts
DELAY_MS = 1500  # the simulator's stall and slow headers: well beyond the client's timeouts

EXPECTED_KIND = {
    "http_429": "http_429",
    "http_500": "http_5xx",
    "http_503": "http_5xx",
    "html_502": "http_5xx",
    "refuse": "transport",
    "non_sse": "bad_stream",
    "slow_headers": "timeout",
    "cut": "incomplete",
    "reset": "transport",
    "stream_error": "stream_error",
    "bad_json": "bad_stream",
    "stall": "timeout",
    "huge_chunk": None,  # a valid response with one very large event: a success
}
"""What the client must count for each injected fault kind (None: the request succeeds)."""


def test_every_fault_kind_has_an_expected_outcome():
    assert set(EXPECTED_KIND) == set(faults.KINDS)


def sim_args(*fault_args: str) -> list[str]:
    return [
        "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", str(OUTPUT_TOKENS),
        "--fault-stall-ms", str(DELAY_MS), "--fault-slow-headers-ms", str(DELAY_MS),
        "--fault-huge-bytes", "200000", "--fault-seed", str(FAULT_SEED), *fault_args,
    ]  # fmt: skip


def run_users(sim, results_dir, users: int, seconds: float):
    """A LocalRunner against `sim`; users finish their request in flight when it stops."""
    opts = options(
        "--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", str(OUTPUT_TOKENS), "--ignore-eos",
        "--first-token-timeout-s", str(TIMEOUT_S), "--read-timeout-s", str(TIMEOUT_S),
        "--results-dir", str(results_dir), "--interval-s", "1",
    )  # fmt: skip
    # users finish their request in flight: every request the simulator saw is counted by the client
    env = run_local(opts, users, seconds, stop_timeout_s=10)
    gevent.sleep(0.3)  # the simulator records a timed-out request when it sees the client close
    return env


def run_distributed(sim, results_dir, users: int, seconds: float):
    """A master and 2 workers in this process (real ZeroMQ over loopback) against `sim`."""
    opts = options(
        "--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", str(OUTPUT_TOKENS), "--ignore-eos",
        "--first-token-timeout-s", str(TIMEOUT_S), "--read-timeout-s", str(TIMEOUT_S),
        "--results-dir", str(results_dir), "--interval-s", "1", "--stop-timeout", "10",
    )  # fmt: skip
    master_env = new_env(opts)
    master = master_env.create_master_runner("127.0.0.1", 0)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    for _ in range(2):
        worker_env = new_env(options())  # gets the master's options, --stop-timeout included
        worker = worker_env.create_worker_runner("127.0.0.1", master.server.port)
        worker_env.events.init.fire(environment=worker_env, runner=worker, web_ui=None)
    deadline = time.monotonic() + 10
    while master.worker_count < 2 and time.monotonic() < deadline:
        gevent.sleep(0.1)
    master.start(users, spawn_rate=users)
    gevent.sleep(seconds)
    master.stop()
    gevent.sleep(1.5)  # the users finish their requests in flight; the simulator sees the timed-out ones close
    master.quit()
    master_env.events.quitting.fire(environment=master_env, reverse=True)
    return master_env


def check_matrix(sim, env, results_dir) -> tuple[dict, list[dict]]:
    """The exact comparison of client counts with the simulator's trace; returns (summary, trace)."""
    summary = read_summary(results_dir)
    trace = [r for r in sim.trace() if r["endpoint"] == "chat"]
    injected = Counter(EXPECTED_KIND[r["fault"]] for r in trace if r["fault"] is not None)
    # a `refuse` on a kept-alive connection (reset before any response byte) is what a stale connection looks like
    # to the client: sent again once, on a new connection (`retried_stale`), not a request or a failure of its own
    retried = summary["connections"]["retried_stale"]
    assert retried <= sum(1 for r in trace if r["fault"] == "refuse")
    injected["transport"] -= retried
    expected_failures = {kind: n for kind, n in injected.items() if kind is not None and n}
    answered = [r for r in trace if r["fault"] is None or EXPECTED_KIND[r["fault"]] is None]
    cut = sum(1 for r in answered if r["cancelled"])  # the client went away: cut by the end (`unfinished`)
    expected_ok = len(answered) - cut

    assert summary["status"] == "complete", summary["warnings"]
    assert summary["failures"] == expected_failures
    assert summary["throughput"]["requests_ok"] == expected_ok and summary["unfinished"]["requests"] == cut
    with (results_dir / "llm_timeseries.csv").open() as f:  # failures by kind over time add up
        rows = list(csv.DictReader(f))
    by_kind = {kind: sum(int(r[f"failed_{kind}"]) for r in rows) for kind in expected_failures}
    assert by_kind == expected_failures
    # Locust's own statistics agree: one failed POST per failure, each message starting with its kind
    post = env.stats.get("/v1/chat/completions", "POST")
    assert post.num_requests == len(trace) - retried and post.num_failures == sum(expected_failures.values())
    by_kind = Counter()
    for error in env.stats.errors.values():  # "<kind>: <message>", as "RequestFailure('...')" from workers
        text = str(error.error).removeprefix("RequestFailure(").lstrip("'\"")
        by_kind[text.split(":")[0]] += error.occurrences
    assert dict(by_kind) == expected_failures

    # failed streams that had produced a token keep their TTFT apart from the successes'
    mid_stream_failures = sum(
        1 for r in trace if r["fault"] in faults.MID_STREAM and EXPECTED_KIND[r["fault"]] is not None
    )
    assert summary["metrics"]["ttft_failed_ms"]["count"] == mid_stream_failures

    # successes: exact token counts, timings as the simulator served them, no fault leaking in
    m = summary["metrics"]
    assert summary["throughput"]["output_tokens"] == OUTPUT_TOKENS * expected_ok
    assert m["itl_ms"]["count"] == (OUTPUT_TOKENS - 1) * expected_ok
    assert m["e2e_ms"]["max"] < DELAY_MS / 2  # no stalled or delayed request among the successes
    served_ttft_ms = [
        (r["token_times"][0] - r["t_recv"]) * 1000 for r in trace if r["fault"] is None and r["token_times"]
    ]
    if served_ttft_ms:
        assert abs(m["ttft_ms"]["p50"] - statistics.median(served_ttft_ms)) < 10
    return summary, trace


# one run with every fault kind at once: the default (CI) case
MIXED_PROBABILITY = 0.05
MIXED = [arg for kind in faults.KINDS for arg in ("--fault", f"{kind}={MIXED_PROBABILITY}")]
FAULT_SEED = 7  # sim_args' --fault-seed


def requests_to_draw_every_kind() -> int:
    """How many requests the simulator's seeded draws (MIXED) take until every kind was drawn once:
    a run with at least that many requests injected every kind, whatever their order."""
    picker = faults.FaultPicker([(kind, MIXED_PROBABILITY) for kind in faults.KINDS], FAULT_SEED)
    seen: set[str | None] = set()
    for n in range(1, 10_000):
        seen.add(picker.pick())
        if set(faults.KINDS) <= seen:
            return n
    raise AssertionError("some fault kind is never drawn")


@pytest.mark.alone  # exact fault counts against the trace
def test_fault_matrix_all_kinds_in_one_run(tmp_path):
    with run_sim(*sim_args(*MIXED)) as sim:
        env = run_users(sim, tmp_path, users=8, seconds=4)
        summary, trace = check_matrix(sim, env, tmp_path)
    injected = Counter(r["fault"] for r in trace if r["fault"])
    assert len(injected) >= 8, injected  # most kinds occurred (60 % of ~200 requests are faulted)
    assert summary["throughput"]["requests_ok"] > 20
    throttled = summary["throttling"]
    assert throttled["http_429"] == injected["http_429"]
    requests = len(trace) - summary["connections"]["retried_stale"]  # a retried request is one request
    assert throttled["share_of_requests"] == round(injected["http_429"] / requests, 4)


@pytest.mark.slow
@pytest.mark.parametrize("kind", faults.KINDS)
def test_fault_matrix_one_kind(kind, tmp_path):
    with run_sim(*sim_args("--fault", f"{kind}=0.3")) as sim:
        env = run_users(sim, tmp_path, users=4, seconds=3)
        _, trace = check_matrix(sim, env, tmp_path)
    assert sum(1 for r in trace if r["fault"] == kind) >= 3


@pytest.mark.alone  # exact fault counts against the trace
def test_fault_matrix_all_kinds_master_and_workers(tmp_path):
    """The same exactness through the worker -> master merge (failures, ttft_failed, Locust's errors),
    with every fault kind injected at least once (CI's robustness check through master and workers)."""
    with run_sim(*sim_args(*MIXED)) as sim:
        env = run_distributed(sim, tmp_path, users=8, seconds=4)
        summary, trace = check_matrix(sim, env, tmp_path)
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert len(trace) >= requests_to_draw_every_kind()  # ~300 requests here
    assert {r["fault"] for r in trace if r["fault"]} == set(faults.KINDS)
