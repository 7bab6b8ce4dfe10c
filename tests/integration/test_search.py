"""Capacity search and capacity pick end to end: the `locust` CLI against the simulator's batching model, checked
against the capacity its parameters give and the TTFT its trace recorded; a sweep whose steps are mostly throttled."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import ROOT, read_summary, run_locust

from llm_locust.metrics.gates import EXIT_GATE_FAILED
from llm_locust.report.build import build_report
from llm_locust.report.cli import main as report_main
from llm_locust.sim import run_sim
from llm_locust.sim.engine import BatchingEngine, BatchingParams, Sequence

pytestmark = pytest.mark.alone  # capacity search: the knee found is the simulator's, not a loaded machine's

SEARCH_FILE = ROOT / "locustfiles" / "search.py"
SWEEP_FILE = ROOT / "locustfiles" / "sweep.py"

MAX_BATCH, OUTPUT_TOKENS, STEP_S = 8, 16, 0.010
"""The simulator's batching model: 8 slots, 16 tokens per answer, a constant 10 ms decode step (no prefill cost)."""
SIM_ARGS = ("--timing", "batching", "--max-batch", str(MAX_BATCH), "--decode-step-ms", str(STEP_S * 1e3),
            "--decode-step-ms-per-seq", "0", "--prefill-us-per-token", "0",
            "--output-tokens", str(OUTPUT_TOKENS))  # fmt: skip
CAPACITY_PER_S = MAX_BATCH / (OUTPUT_TOKENS * STEP_S)
"""50 req/s: each request holds a slot for 16 steps of 10 ms; above this the queue grows without bound."""
SLO_MS = 100.0


def model_ttft_p90_ms(rate_per_s: float, seconds: float = 400.0, seed: int = 1) -> float:
    """The simulator's own engine (`sim.engine.BatchingEngine`, no I/O) fed Poisson arrivals at `rate_per_s` for
    `seconds`: the p90 of its TTFT (arrival to the end of the step that makes the first token), ms, after the first
    10 s."""
    rng = random.Random(seed)
    engine = BatchingEngine(BatchingParams(MAX_BATCH, STEP_S, 0.0, 0.0))
    arrivals, t_s = [], rng.expovariate(rate_per_s)
    while t_s < seconds:
        arrivals.append(t_s)
        t_s += rng.expovariate(rate_per_s)
    ttft_s: list[float] = []
    next_arrival = 0
    while next_arrival < len(arrivals) or engine.step_end_s is not None:
        if engine.step_end_s is not None and (
            next_arrival == len(arrivals) or engine.step_end_s <= arrivals[next_arrival]
        ):
            end_s = engine.step_end_s
            ttft_s += [end_s - seq.t_recv_s for seq in engine.complete_step() if seq.emitted == 1 and seq.t_recv_s > 10]
        else:
            engine.submit(Sequence(1, OUTPUT_TOKENS, arrivals[next_arrival]), arrivals[next_arrival])
            next_arrival += 1
    return float(np.percentile(ttft_s, 90) * 1e3)


def slo_failure_rate_per_s() -> float:
    """The rate (req/s, to 0.5) at which the model's long-run TTFT p90 crosses the SLO: its queueing knee."""
    low, high = 0.2 * CAPACITY_PER_S, CAPACITY_PER_S
    while high - low > 0.5:
        middle = (low + high) / 2
        low, high = (middle, high) if model_ttft_p90_ms(middle) <= SLO_MS else (low, middle)
    return (low + high) / 2


def trial_server_p90_ms(trace: list[dict], trials: int, warmup_s: float) -> list[float]:
    """Per trial, in the order run: the p90 TTFT the simulator served (first token written − request received), ms.
    Trials are told apart by the pauses between them: the `trials − 1` longest gaps between arrivals."""
    records = sorted((r for r in trace if r["endpoint"] == "chat" and r["token_times"]), key=lambda r: r["t_recv"])
    t_recv = np.array([r["t_recv"] for r in records])
    cuts = np.sort(np.argsort(np.diff(t_recv))[-(trials - 1) :] + 1) if trials > 1 else []
    p90 = []
    for group in np.split(np.arange(len(records)), cuts):
        start_s = t_recv[group[0]]
        ttft_ms = [1e3 * (records[i]["token_times"][0] - t_recv[i]) for i in group if t_recv[i] >= start_s + warmup_s]
        p90.append(float(np.percentile(ttft_ms, 90)))
    return p90


def check_search(summary: dict, trace: list[dict], warmup_s: float, knee_per_s: float) -> dict:
    """The checks shared by the local and the distributed search; returns the search."""
    search = summary["search"]
    trials = search["trials"]
    best, failing = search["max_rate_per_s"], search["lowest_failing_rate_per_s"]
    # the answer sits at the simulator's queueing knee: not below half of it, not above the capacity of its slots
    assert best is not None and failing is not None, search
    assert 0.5 * knee_per_s <= best <= 1.1 * CAPACITY_PER_S, search
    assert failing >= 0.5 * knee_per_s, search
    assert failing - best <= search["precision"] * failing or search["stopped"].startswith("time budget")
    assert search["failed_there"]["statistic"] == "ttft_p90_ms" and search["failed_there"]["value"] > SLO_MS
    # every trial's verdict agrees with the TTFT the simulator itself served, wherever that is clear
    server_p90 = trial_server_p90_ms(trace, len(trials), warmup_s)
    for trial, p90 in zip(trials, server_p90, strict=True):
        if p90 <= 0.3 * SLO_MS:  # the client's TTFT adds its own delays: a wide margin for a loaded machine
            assert trial["passed"], (trial, p90)
        if p90 >= 2 * SLO_MS:
            assert not trial["passed"], (trial, p90)
    by_rate = dict(zip((t["rate_per_s"] for t in trials), server_p90, strict=True))
    # the server's own TTFT: about the SLO at most at the answer (its sample is cut at the warm-up by arrival, the
    # client's by ticket), queueing (well above its ~20 ms unloaded) at the failure
    assert by_rate[best] <= 1.25 * SLO_MS and by_rate[failing] > 0.5 * SLO_MS, by_rate
    # summary: each trial is a step; the verdict passes (a rate was found); goodput is the passing trial's
    steps = {step["index"]: step for step in summary["steps"]}
    assert [steps[t["step"]]["rate_per_s"] for t in trials] == pytest.approx([t["rate_per_s"] for t in trials])
    (best_trial,) = [t for t in trials if t["rate_per_s"] == best]
    assert (
        search["goodput_per_s"]
        == best_trial["goodput_per_s"]
        == steps[best_trial["step"]]["throughput"]["goodput_per_s"]
    )
    assert summary["load"]["model"] == "rate_search" and summary["verdict"]["passed"]
    return search


@pytest.fixture(scope="module")
def knee_per_s() -> float:
    knee = slo_failure_rate_per_s()
    assert 0.6 * CAPACITY_PER_S < knee < CAPACITY_PER_S  # queueing makes the SLO fail before the slots are full
    return knee


def search_args(url: str, results: str, max_rate: float, precision: float, step_s: float, warmup_s: float) -> list:
    return ["--host", url, "--search-max-rate", str(max_rate), "--search-precision", str(precision),
            "--slo", f"ttft_p90_ms={SLO_MS:g}", "--step-duration-s", str(step_s), "--warmup-s", str(warmup_s),
            "--max-tokens", str(OUTPUT_TOKENS), "--ignore-eos", "--prompt-tokens", "8", "--seed", "7",
            "--results-dir", results, "--only-summary"]  # fmt: skip


def test_search_finds_the_simulators_queueing_knee(knee_per_s, tmp_path, capsys):
    with run_sim(*SIM_ARGS) as sim:
        proc = run_locust(SEARCH_FILE, *search_args(sim.url, str(tmp_path), 80, 0.25, 3, 0.5), timeout_s=120)
        trace = sim.trace()
    assert proc.returncode == 0, proc.stderr[-3000:]
    search = check_search(read_summary(tmp_path), trace, 0.5, knee_per_s)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("Capacity search: "))
    assert line.startswith(f"Capacity search: {search['max_rate_per_s']:g} req/s (goodput ")
    report = build_report([tmp_path], tmp_path / "report.html", png=False)
    (cap,) = report.capacities
    assert cap.best is not None and cap.best.load == search["max_rate_per_s"]  # the pick agrees with the search
    page = report.html_path.read_text()
    assert line.replace(">", "&gt;") in page and page.count('<td class="fail">no</td>') >= 1
    assert report_main([str(tmp_path), "--no-png", "-o", str(tmp_path / "cli.html")]) == 0
    assert f"{tmp_path.name}: {line}" in capsys.readouterr().out


@pytest.mark.slow
def test_search_through_master_and_two_workers(knee_per_s, tmp_path):
    # 1 % of the requests fail (HTTP 500), within --max-error-rate 0.15 (>= 6 of a trial's >= 37: odds ~1e-5)
    with run_sim(*SIM_ARGS, "--fault", "http_500=0.01") as sim:
        args = search_args(sim.url, str(tmp_path), 100, 0.1, 4, 1)
        proc = run_locust(SEARCH_FILE, "--processes", "2", *args, "--max-error-rate", "0.15", timeout_s=300)
        trace = sim.trace()
    assert proc.returncode == 0, proc.stderr[-3000:]  # the search found a rate: not Locust's 1 for failed requests
    summary = read_summary(tmp_path)
    check_search(summary, trace, 1.0, knee_per_s)
    assert summary["failures"]["http_5xx"] > 0
    assert summary["run"]["workers_max"] == 2 and len(summary["run"]["requests_by_worker"]) == 2


def test_search_with_no_passing_rate_fails_the_verdict(tmp_path):
    # half of all requests are throttled: no trial can pass, the search halves its rate until the budget is used
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--fault", "http_429=0.5") as sim:
        proc = run_locust(
            SEARCH_FILE, "--host", sim.url, "--search-max-rate", "64", "--search-budget-s", "4",
            "--step-duration-s", "1.5", "--warmup-s", "0.5", "--results-dir", str(tmp_path), "--only-summary",
        )  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    search = summary["search"]
    assert search["max_rate_per_s"] is None and search["stopped"].startswith("time budget")
    assert [t["failed"]["statistic"] for t in search["trials"]] == ["error_rate"] * len(search["trials"])
    rates = [t["rate_per_s"] for t in search["trials"]]
    assert rates and rates == [64 / 8 / 2**i for i in range(len(rates))]  # R/8, then halving while trials fail
    assert any(r.startswith("capacity search: no trial met every objective") for r in summary["verdict"]["reasons"])


@pytest.mark.parametrize(
    ("locustfile", "args", "message"),
    [
        (SEARCH_FILE, [], "locustfiles/search.py needs --search-max-rate"),
        (SWEEP_FILE, ["--search-max-rate", "10"], "--search-max-rate needs the search's load shape"),
        (SEARCH_FILE, ["--search-max-rate", "10", "--search-precision", "2"], "--search-precision must be"),
        (SEARCH_FILE, ["--search-max-rate", "10", "--request-rate", "3"], "exclude each other"),
    ],
)
def test_bad_search_options_are_one_line_and_exit_2(locustfile, args, message):
    proc = run_locust(locustfile, "--host", "http://127.0.0.1:9", "-t", "2s", *args, timeout_s=30)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_capacity_pick_skips_steps_whose_requests_were_throttled(tmp_path):
    # fast answers, but the simulator throttles (HTTP 429) about half of all requests at every step
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8", "--fault", "http_429=0.5") as sim:
        proc = run_locust(
            SWEEP_FILE, "--host", sim.url, "--sweep-users", "1,2", "--step-duration-s", "2", "--warmup-s", "0.5",
            "--slo", "ttft_p90_ms=1000", "--results-dir", str(tmp_path), "--only-summary",
        )  # fmt: skip
    # half the requests failed: more than the default --max-error-rate (0.01), the run's verdict fails
    assert proc.returncode == EXIT_GATE_FAILED, proc.stderr[-3000:]
    steps = read_summary(tmp_path)["steps"]
    shares = [s["throughput"]["requests_failed"] / (s["throughput"]["requests_ok"] + s["throughput"]["requests_failed"])
              for s in steps]  # fmt: skip
    assert all(0.2 < share < 0.8 for share in shares) and all(s["metrics"]["ttft_ms"]["p90"] < 1000 for s in steps)
    report = build_report([tmp_path], tmp_path / "report.html", png=False)
    (cap,) = report.capacities
    assert cap.best is None  # the old pick took users=2: its few successes were fast
    assert [c.failure.statistic for c in cap.checks] == ["error_rate", "error_rate"]
    assert (
        "no step meets every SLO (ttft_p90_ms=1000 with at most 0.01 of requests failed)"
        in report.html_path.read_text()
    )
    lenient = build_report([tmp_path], tmp_path / "lenient.html", png=False, max_error_rate=0.9)
    assert lenient.capacities[0].best.label == "users=2"
