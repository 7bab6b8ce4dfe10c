"""The 95 % intervals of summary.json's percentiles against a known truth (docs/metrics.md "Intervals"): the
simulator draws each request's TTFT from a lognormal (`--ttft-ms lognormal:median=MS,sigma=S`, seeded), whose
quantiles are known, and the intervals of p50, p90 and p99 must cover them in at least 93 of 100 short runs (a local
runner in this process, each run the next 400 draws), and per step of a rate sweep through `--processes 2`.

Every request sent runs to its end (`--stop-timeout`), so each run's TTFTs are the simulator's draws, independent,
plus the loopback's and both processes' own delays. Those must stay small beside the intervals' half-widths (p50:
~30 ms): the median is large (500 ms) and the load an open loop (a burst of users all connecting at once, the closed
loop's start, delays some first tokens by 100 ms and more on a crowded machine). On a 2-core machine at load ~12 the
client and the simulator still added ~15 ms to the median (p50 measured at 515 ms on average) and the first test
counted 85 / 91 / 95 of 100 (p50 / p90 / p99): it needs a machine whose client error is well below p50's ~33 ms
half-width."""

from __future__ import annotations

import pytest
from conftest import ROOT, options, read_summary, run_local, run_locust

from llm_locust.sim import run_sim
from llm_locust.sim.latency import parse_latency

TTFT = parse_latency("lognormal:median=500,sigma=0.5")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
SIM_ARGS = ("--ttft-ms", str(TTFT), "--itl-ms", "1", "--output-tokens", "1")
RATE_PER_S = 130
REQUESTS = 400


def covered(metrics: dict, key: str) -> tuple[bool, bool]:
    """Whether the TTFT interval of percentile `key` covers the truth, and whether both its ends are bounded."""
    low, high = metrics["ttft_ms"][f"{key}_ci95"]
    truth = TTFT.quantile_ms(QUANTILES[key])
    return (low is None or low <= truth) and (high is None or truth <= high), low is not None and high is not None


@pytest.mark.slow
@pytest.mark.timeout(2400)  # 100 runs of ~10 s
def test_intervals_cover_the_true_quantiles_in_93_of_100_runs(tmp_path):
    runs = 100
    hits = dict.fromkeys(QUANTILES, 0)
    with run_sim(*SIM_ARGS, "--ttft-seed", "45") as sim:
        for run in range(runs):
            folder = tmp_path / f"run{run}"
            opts = options("--headless", "--host", sim.url, "--max-tokens", "1", "--interval-s", "1",
                           "--results-dir", str(folder), "--request-rate", str(RATE_PER_S),
                           "--max-requests", str(REQUESTS))  # fmt: skip
            run_local(opts, users=200, seconds=30, stop_timeout_s=4.5, until_stopped=True)
            summary = read_summary(folder)
            assert summary["failures"] == {} and summary["unfinished"]["requests"] == 0, summary["warnings"]
            assert summary["metrics"]["ttft_ms"]["count"] == REQUESTS  # every request sent ran to its end
            for key in QUANTILES:
                hit, bounded = covered(summary["metrics"], key)
                assert bounded, (run, key, summary["metrics"]["ttft_ms"])  # 400 values bound even p99's interval
                hits[key] += hit
    print(f"\ncoverage of {runs} runs of {REQUESTS} requests:", hits)
    assert all(hit >= 93 for hit in hits.values()), hits


@pytest.mark.slow
def test_intervals_cover_the_true_quantiles_per_step_of_a_sweep_through_two_processes(tmp_path):
    checks = hits = 0
    for seed in (1, 2):
        folder = tmp_path / f"seed{seed}"
        with run_sim(*SIM_ARGS, "--ttft-seed", str(seed)) as sim:
            proc = run_locust(ROOT / "locustfiles" / "sweep.py", "--host", sim.url, "--processes", "2",
                              "--sweep-rates", "80,120", "--max-concurrency", "200", "--step-duration-s", "6",
                              "--warmup-s", "1", "--stop-timeout", "15", "--max-tokens", "1", "--interval-s", "1",
                              "--results-dir", str(folder), timeout_s=150)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = read_summary(folder)
        assert [step["rate_per_s"] for step in summary["steps"]] == [80, 120]
        for step in summary["steps"]:
            assert step["metrics"]["ttft_ms"]["count"] >= 370, step["metrics"]["ttft_ms"]
            for key in QUANTILES:
                hit, bounded = covered(step["metrics"], key)
                assert bounded, (seed, step["index"], key, step["metrics"]["ttft_ms"])
                checks += 1
                hits += hit
    print(f"\nper step: {hits} of {checks} intervals cover the truth")
    assert hits >= checks - 2  # 12 checks at 95 %: 10 or more in 98 % of such tests
