"""Drift and the verdict of a run (gates) in a real run (the pure units: tests/unit/metrics/test_gates.py)."""

import pytest
from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust

from llm_locust.metrics.gates import EXIT_GATE_FAILED
from llm_locust.sim import run_sim


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


@pytest.fixture(scope="module")
def malformed_sim():
    """The simulator breaking 90 % of its streams half-way with a chunk that is not JSON."""
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "8", "--fault", "bad_json=0.9") as sim:
        yield sim


@pytest.mark.parametrize(("extra", "passed"), [((), False), (("--max-error-rate", "1"), True)], ids=["default", "off"])
def test_most_streams_malformed_fail_unless_the_error_gate_is_off(malformed_sim, tmp_path, extra, passed):
    """No gate given: the default --max-error-rate (0.01) fails the run (exit 3); `--max-error-rate 1` turns it off,
    the verdict passes and the process exits 0, the verdict's code (not Locust's own 1 for failed requests)."""
    proc = run_locust(
        LOCUSTFILE, "-u", "2", "-r", "2", "--run-time", "3s", "--host", malformed_sim.url, "--max-tokens", "8",
        "--results-dir", str(tmp_path), *extra, timeout_s=60,
    )  # fmt: skip
    summary = read_summary(tmp_path)
    t, verdict = summary["throughput"], summary["verdict"]
    assert t["requests_ok"] > 0 and t["requests_failed"] > t["requests_ok"], t  # most failed, some succeeded
    assert set(summary["failures"]) == {"bad_stream"}
    assert verdict["passed"] is passed and verdict["max_error_rate"] == (1.0 if passed else 0.01)
    assert proc.returncode == verdict["exit_code"], proc.stderr[-3000:]
    if passed:
        assert proc.returncode == 0 and "Verdict: PASSED" in proc.stdout, proc.stderr[-3000:]
    else:
        assert proc.returncode == EXIT_GATE_FAILED, proc.stderr[-3000:]
        failed, attempted = t["requests_failed"], t["requests_ok"] + t["requests_failed"]
        reason = f"error rate {failed / attempted:.4f} ({failed} of {attempted} requests) > --max-error-rate 0.01"
        assert verdict["reasons"] == [reason]
        assert f"Verdict: FAILED: {reason}" in proc.stdout


CHECKED = """
from locust import events, task
from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)


class Checked(LLMUser):
    n = 0

    @task
    def ask(self):
        Checked.n += 1
        with self.llm.chat.completions.create(
            messages=[{"role": "user", "content": "Name a river."}], max_tokens=4, catch_response=True
        ) as answer:
            if Checked.n % FAIL_EVERY == 0:
                answer.failure("not a river")
"""


@pytest.mark.parametrize(
    ("fail_every", "extra", "code"),
    [(2, ("--max-error-rate", "1"), 0), (1, ("--max-error-rate", "1"), 1), (2, (), EXIT_GATE_FAILED)],
    ids=["gate-off", "nothing-succeeded", "gate-failed"],
)
def test_the_process_exits_with_the_verdicts_code(fast_sim, tmp_path, fail_every, extra, code):
    """A scenario whose checks fail every `fail_every`-th answer, through the `locust` CLI: the process's exit code is
    summary.json's `verdict.exit_code`, always — 0 when the gate is off and some answers passed (Locust's own code
    would be 1), 1 when nothing succeeded for a reason outside the command (the verdict's "no request succeeded"), 3
    when the error-rate gate failed."""
    locustfile = tmp_path / "checked.py"
    locustfile.write_text(CHECKED.replace("FAIL_EVERY", str(fail_every)))
    results = tmp_path / "results"
    proc = run_locust(
        locustfile, "-u", "2", "-r", "2", "--run-time", "2s", "--host", fast_sim.url, "--results-dir", str(results),
        *extra, timeout_s=60,
    )  # fmt: skip
    summary = read_summary(results)
    assert summary["failures"] == {"check": summary["throughput"]["requests_failed"]}, summary["failures"]
    assert summary["throughput"]["requests_failed"] > 0
    assert proc.returncode == summary["verdict"]["exit_code"] == code, proc.stderr[-3000:]
    assert f"Shutting down (exit code {code})" in proc.stderr
