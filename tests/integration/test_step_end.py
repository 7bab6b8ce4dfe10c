"""Steps that find their steady state, end when their answer is known, and stop a sweep that over-saturates its
server (`load.step_end`, `runtime.step_watch`): the `locust` CLI against the simulator."""

from __future__ import annotations

from conftest import ROOT, read_summary, run_locust

from llm_locust.sim import run_sim

SWEEP_FILE = ROOT / "locustfiles" / "sweep.py"


def test_a_warming_up_server_is_steady_only_after_its_drift(tmp_path):
    # TTFT 300 ms at the first request, falling to 100 ms over 6 s; decided on the master from 2 workers' reports
    drift_s = 6.0
    with run_sim("--ttft-ms", "100", "--itl-ms", "5", "--output-tokens", "8", "--warmup-drift-s", str(drift_s)) as sim:
        proc = run_locust(
            SWEEP_FILE, "--host", sim.url, "--processes", "2", "--sweep-users", "8", "--step-duration-s", "18",
            "--warmup-s", "1", "--max-tokens", "8", "--ignore-eos", "--interval-s", "1", "--results-dir", str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (step,) = read_summary(tmp_path)["steps"]
    steady = step["steady_state"]
    assert steady["settled"] and steady["reached"], steady
    assert drift_s - 1.0 <= steady["after_s"] <= 14.0, steady  # a window boundary at most 1 s before the drift's end
    assert abs(step["measure_s"] - (18.0 - steady["after_s"])) <= 1.5  # measured from there to the step's end
    ttft = step["metrics"]["ttft_ms"]
    assert ttft["p50"] < 125.0, ttft  # the drift left out: 100 ms and the client's own delay (at the floor: ~270 ms)
    assert step["warmup_requests"] > ttft["count"] / 5  # the drifting seconds (a third of the step) are warm-up
    assert step["ended"] == {"reason": "duration", "detail": None}


def test_a_queue_that_grows_stops_the_sweep(tmp_path):
    # 4 sequences at a time, ~16 steps of ~10 ms each: ~25 req/s; 60 req/s offered from step 1 on
    args = ("--timing", "batching", "--max-batch", "4", "--decode-step-ms", "10", "--decode-step-ms-per-seq", "0")
    with run_sim(*args) as sim:
        proc = run_locust(
            SWEEP_FILE, "--host", sim.url, "--sweep-rates", "5,60,80", "--step-duration-s", "25", "--warmup-s", "1",
            "--max-concurrency", "512", "--max-tokens", "16", "--ignore-eos", "--interval-s", "1",
            "--results-dir", str(tmp_path), timeout_s=150,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    steps = summary["steps"]
    assert [s["label"] for s in steps] == ["rate=5/s", "rate=60/s"]  # no step at 80/s
    assert steps[0]["ended"]["reason"] == "duration"
    ended = steps[1]["ended"]
    assert ended["reason"] == "oversaturated", ended
    detail = ended["detail"]
    assert detail["offered_rate_per_s"] == 60.0 and detail["achieved_rate_per_s"]["high"] < 60.0
    assert detail["ttft_slope_ms_per_s"]["low"] > 0
    assert steps[1]["measure_s"] < 20.0  # ended well before its 25 s
    assert "over-saturated" in summary["run"]["stop_reason"] and "step 1" in summary["run"]["stop_reason"]
    assert "over-saturated" in proc.stderr


def test_precision_ends_a_step_once_its_answer_is_known(tmp_path):
    with run_sim("--ttft-ms", "50", "--itl-ms", "2", "--output-tokens", "8") as sim:
        proc = run_locust(
            SWEEP_FILE, "--host", sim.url, "--sweep-users", "4,8", "--step-duration-s", "40", "--warmup-s", "1",
            "--max-tokens", "8", "--ignore-eos", "--interval-s", "1", "--precision", "10%",
            "--slo", "ttft_p90_ms=500", "--results-dir", str(tmp_path), timeout_s=150,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = read_summary(tmp_path)["steps"]
    assert len(steps) == 2
    for step in steps:
        ended = step["ended"]
        assert ended["reason"] == "precision", ended
        assert step["steady_state"]["reached"]
        estimates = {e["name"]: e for e in ended["detail"]["estimates"]}
        assert set(estimates) == {"ttft_p90_ms", "achieved_rate_per_s"}
        for e in estimates.values():
            assert e["value"] * 0.9 <= e["low"] <= e["high"] <= e["value"] * 1.1, e
        assert ended["detail"]["requests"] >= 100
        assert step["start_time"] < step["end_time"]  # and well inside its 40 s:
    assert sum(s["measure_s"] for s in steps) < 40.0
