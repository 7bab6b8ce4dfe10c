"""Energy and cost per token, for real: a two-step sweep scrapes the simulator's DCGM page (2 simulated GPUs whose
power follows the real running batch, docs/simulator.md) every 0.1 s with a price per hour; summary.json's `energy`
must be what the documented power model gives for the batch the simulator's trace shows, and `cost` the price's
arithmetic over the tokens and the window, for the run and for each step; the report shows both."""

from __future__ import annotations

import shutil
from itertools import pairwise

import pytest
from conftest import ROOT, read_summary, run_locust, short_run
from pytest import approx

from llm_locust.report.build import build_report
from llm_locust.sim import run_sim

SWEEP_FILE = ROOT / "locustfiles" / "sweep.py"
GPUS = 2
MAX_BATCH = 8
SWEEP_USERS = (2, 6)
USD_PER_HOUR = 3.6
SCRAPE_S = 0.1


def gpu_power_w(running: int) -> float:
    """The simulator's documented DCGM power, summed over its GPUs i = 0..GPUS-1: 70 + 6.3 u + 5 i W each, with
    u = round(100 x running / max_batch) % (docs/simulator.md, `GET /gpu-metrics`)."""
    u = round(100 * min(1.0, running / MAX_BATCH))
    return sum(70 + 6.3 * u + 5 * i for i in range(GPUS))


def busy_energy_j(trace: list[dict]) -> float:
    """Joules above the idle power while requests ran: the running batch from the trace (each request runs from its
    admission, arrival `t_recv` + `queue_s`, to its end `t_done`; perf_counter s) through `gpu_power_w`."""
    changes = sorted([(r["t_recv"] + r["queue_s"], 1) for r in trace] + [(r["t_done"], -1) for r in trace])
    joules, running = 0.0, 0
    for (t, step), (t_next, _) in pairwise(changes):
        running += step
        joules += (gpu_power_w(running) - gpu_power_w(0)) * (t_next - t)
    return joules


@pytest.fixture(scope="module")
def energy_run(tmp_path_factory):
    """Sweep 2 then 6 users (4 s steps, 1 s warm-up) on a fixed-timing simulator (1.3 s responses), scraping its
    /gpu-metrics every 0.1 s, at 3.6 $/h."""
    results = tmp_path_factory.mktemp("energy") / "run"
    with run_sim("--ttft-ms", "20", "--itl-ms", "10", "--output-tokens", "128", "--gpus", str(GPUS),
                 "--max-batch", str(MAX_BATCH)) as sim:  # fmt: skip
        done = run_locust(
            SWEEP_FILE, "--host", sim.url, "--sweep-users", ",".join(map(str, SWEEP_USERS)), "--step-duration-s", "4",
            "--warmup-s", "1", "--max-tokens", "128", "--only-summary", "--results-dir", str(results),
            "--metrics-url", f"{sim.url}/gpu-metrics", "--metrics-interval-s", str(SCRAPE_S),
            "--cost-per-hour", str(USD_PER_HOUR),
        )  # fmt: skip
        trace = [r for r in sim.trace() if r["endpoint"] == "chat"]
    assert done.returncode == 0, done.stderr[-3000:]
    return results, read_summary(results), trace, done


def test_run_energy_per_token_is_the_power_model_over_the_trace(energy_run):
    """Idle power over the whole window plus the trace's batch above idle, per output token, within 2 %."""
    _, summary, trace, _ = energy_run
    duration_s = summary["run"]["duration_s"]
    tokens, requests = summary["throughput"]["output_tokens"], summary["throughput"]["requests_ok"]
    expected_j = gpu_power_w(0) * duration_s + busy_energy_j(trace)
    energy = summary["energy"]
    assert energy["joules_per_output_token"] == approx(expected_j / tokens, rel=0.02)
    assert energy["joules_per_request"] == approx(expected_j / requests, rel=0.02)
    assert energy["mean_power_w"] == approx(expected_j / duration_s, rel=0.02)
    assert energy["joules"] == approx(energy["mean_power_w"] * duration_s, rel=1e-3)


def test_step_energy_is_the_power_of_its_batch(energy_run):
    """Each step's measurement window runs as many sequences as it has users: its mean power is the model's at that
    batch, and its energy per token and per request that power over its window's tokens and requests. Within 1 %
    plus the documented precision (docs/metrics.md): the jump of power where the step ends (to the next step's
    batch, or to idle) is spread over the scrape interval around it, at most interval x jump / 2 joules."""
    _, summary, _, _ = energy_run
    steps = summary["steps"]
    assert [s["users"] for s in steps] == list(SWEEP_USERS)
    after = [*(gpu_power_w(s["users"]) for s in steps[1:]), gpu_power_w(0)]
    for step, next_power_w in zip(steps, after, strict=True):
        power_w = gpu_power_w(step["users"])
        measure_s, throughput, energy = step["measure_s"], step["throughput"], step["energy"]
        tolerance = 0.01 + SCRAPE_S * abs(next_power_w - power_w) / 2 / (power_w * measure_s)
        assert energy["mean_power_w"] == approx(power_w, rel=tolerance)
        expected_j = energy["mean_power_w"] * measure_s
        assert energy["joules_per_output_token"] == approx(expected_j / throughput["output_tokens"], rel=1e-3)
        assert energy["joules_per_request"] == approx(expected_j / throughput["requests_ok"], rel=1e-3)


def test_cost_per_million_tokens_is_the_price_over_the_tokens(energy_run):
    _, summary, _, _ = energy_run
    windows = [(summary["run"]["duration_s"], summary["throughput"])]
    windows += [(step["measure_s"], step["throughput"]) for step in summary["steps"]]
    for entry, (seconds, throughput) in zip([summary["cost"], *(s["cost"] for s in summary["steps"])], windows,
                                            strict=True):  # fmt: skip
        usd = USD_PER_HOUR * seconds / 3600
        assert entry["usd_per_hour"] == USD_PER_HOUR
        assert entry["usd_per_million_output_tokens"] == approx(usd / throughput["output_tokens"] * 1e6, rel=1e-3)
        assert entry["usd_per_million_input_tokens"] == approx(usd / throughput["prompt_tokens"] * 1e6, rel=1e-3)


def test_report_and_console_show_energy_and_cost(energy_run, tmp_path):
    results, summary, _, done = energy_run
    report = build_report([results], tmp_path / "report.html", png=False)
    rows = report.rows
    steps = summary["steps"]
    assert list(rows["joules_per_output_token"]) == [s["energy"]["joules_per_output_token"] for s in steps]
    assert list(rows["usd_per_million_output_tokens"]) == [s["cost"]["usd_per_million_output_tokens"] for s in steps]
    page = report.html_path.read_text()
    for header in ("J/output token", "J/request", "mean GPU power W", "$/M output tokens", "$/M input tokens"):
        assert page.count(header) == 2, header  # the runs table (whole run) and the steps table
    assert "Energy (DCGM power):" in done.stdout and f"Cost at ${USD_PER_HOUR:g}/h:" in done.stdout
    twin = shutil.copytree(results, tmp_path / "twin")  # two runs: the comparison table has the rows too
    page = build_report([results, twin], tmp_path / "both.html", png=False).html_path.read_text()
    comparison = page[page.index("<h2>Comparison</h2>") :]
    comparison = comparison[: comparison.index("</table>")]
    assert "J/output token" in comparison and "$/M output tokens" in comparison


def test_without_dcgm_power_or_price_both_are_null(fast_sim, tmp_path):
    """A node-exporter (host telemetry, no GPU power) and no --cost-per-hour: `energy` and `cost` are null and the
    console says nothing of them (whatever the requests did: under heavy machine load Locust's run-time timer can
    fire early, so the run's success is not asserted here)."""
    _, console = short_run(tmp_path, fast_sim.url, "--metrics-url", f"{fast_sim.url}/node-metrics",
                           "--metrics-interval-s", "0.5")  # fmt: skip
    summary = read_summary(tmp_path)
    assert summary["telemetry"]["urls"][0]["family"] == "node", console[-3000:]
    assert summary["energy"] is None and summary["cost"] is None
    assert "Energy (DCGM power):" not in console and "Cost at $" not in console and "Traceback" not in console
