"""Drift and the verdict of a run (gates) in a real run (the pure units: tests/unit/metrics/test_gates.py)."""

from conftest import options, read_summary, run_local

from llm_locust.metrics.gates import EXIT_GATE_FAILED


def test_a_run_judged_by_its_gates_writes_drift_and_verdict_and_sets_the_exit_code(fast_sim, tmp_path):
    """A real Locust run (LocalRunner) against the simulator: one SLO that cannot be met, drift on."""
    opts = options("--host", fast_sim.url, "--max-tokens", "16", "--ignore-eos", "--results-dir", str(tmp_path),
                   "--interval-s", "1", "--drift-window-s", "2", "--drift-warmup-s", "1",
                   "--slo", "ttft_p50_ms=1", "--slo", "e2e_p99_ms=60000", "--max-error-rate", "0",
                   "--max-drift-pct", "1000")  # fmt: skip
    env = run_local(opts, users=4, seconds=7)

    summary = read_summary(tmp_path)
    verdict = summary["verdict"]
    ttft_p50 = summary["metrics"]["ttft_ms"]["p50"]
    assert ttft_p50 > 1  # the simulator's TTFT is 20 ms
    assert verdict["reasons"] == [f"SLO ttft_p50_ms=1 not met: {ttft_p50:g} ms"]
    assert [r["ok"] for r in verdict["slo"]] == [False, True] and verdict["error_rate"] == 0.0
    assert env.process_exit_code == EXIT_GATE_FAILED == verdict["exit_code"]

    drift = summary["drift"]
    assert drift["evaluated"] is True and drift["early"]["requests_ok"] > 0 and drift["late"]["requests_ok"] > 0
    assert drift["metrics"]["ttft_ms_p50"]["worse_pct"] is not None
    assert summary["client"]["cpu_saturated"] == [] and summary["client"]["processes_file"] == "workers_timeseries.csv"
    assert (tmp_path / "workers_timeseries.csv").read_text().startswith("time,epoch_s,elapsed_s,process,")
