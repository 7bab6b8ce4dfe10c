"""Drift between early and late windows and the verdict of a run (gates), pure units (the real run:
tests/integration/test_gates_runs.py)."""

import re

import pytest
from conftest import options
from pytest import approx

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.drift import SEGMENTS, DriftTracker
from llm_locust.metrics.gates import EXIT_GATE_FAILED, verdict
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.slo import parse_slos
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.sections import metric_stats, throughput

T0 = 1_700_000_000  # run start, epoch s (a multiple of the 10 s interval)


def record(ttft_s: float, gap_s: float = 0.02, tokens: int = 11, ok: bool = True) -> RequestRecord:
    """A finished request: TTFT `ttft_s`, then `tokens - 1` gaps of `gap_s`."""
    r = RequestRecord("chat", t_send=0.0)
    r.t_first = r.t_first_content = ttft_s
    r.itl_us.extend([round(gap_s * 1e6)] * (tokens - 1))
    r.t_last = ttft_s + gap_s * (tokens - 1)
    r.events = r.usage_completion_tokens = tokens
    if not ok:
        r.fail(ErrorKind.HTTP_5XX, "HTTP 500")
    return r


def window(requests: int, ttft_s: float, failed: int = 0) -> WindowMetrics:
    w = WindowMetrics()
    for _ in range(requests):
        w.add(record(ttft_s))
    for _ in range(failed):
        w.add(record(ttft_s, ok=False))
    return w


def feed(tracker: DriftTracker, run_s: int, interval_s: int, make) -> None:
    """Windows of `interval_s` from T0 to T0 + run_s, each from make(elapsed_s)."""
    for start in range(T0, T0 + run_s, interval_s):
        tracker.add(start, make(start - T0))


def test_drift_compares_the_early_and_the_last_window_exactly():
    tracker = DriftTracker(T0, window_s=100, warmup_s=20)
    # warm-up: slow (left out); then 10 req/10 s at TTFT 100 ms; from 200 s on 5 req/10 s at 150 ms
    feed(tracker, 400, 10, lambda t: window(3, 0.9) if t < 20 else window(10, 0.1) if t < 200 else window(5, 0.15))
    report = tracker.result(T0 + 400)
    assert report["evaluated"] is True
    early, late = report["early"], report["late"]
    assert early["requests_ok"] == 100 and early["span_s"] == 100  # windows starting in [20, 120)
    # the last 3 to 4 segments of 25 s: here from 320 s (segment 8 after the early window) to 400 s
    assert late["span_s"] == 80 and late["requests_ok"] == 40
    m = report["metrics"]
    assert m["requests_per_s"] == {"early": 1.0, "late": 0.5, "worse_pct": 50.0}
    assert m["output_tokens_per_s"]["worse_pct"] == 50.0
    assert m["ttft_ms_p50"]["early"] == approx(100.0, rel=1e-3) and m["ttft_ms_p50"]["late"] == approx(150, rel=1e-3)
    assert m["ttft_ms_p99"]["worse_pct"] == approx(50.0, abs=0.1)  # +50 % (HdrHistogram: 0.1 % buckets)
    assert m["tpot_ms_p50"]["worse_pct"] == 0.0
    assert m["error_rate"] == {"early": 0.0, "late": 0.0, "change_pts": 0.0}


def test_drift_of_the_error_rate_in_points_and_too_short_runs():
    tracker = DriftTracker(T0, window_s=50, warmup_s=0)
    feed(tracker, 200, 5, lambda t: window(9, 0.1, failed=1 if t >= 150 else 0))
    m = tracker.result(T0 + 200)["metrics"]
    assert m["error_rate"] == {"early": 0.0, "late": 0.1, "change_pts": 10.0}

    short = DriftTracker(T0, window_s=50, warmup_s=10)
    feed(short, 100, 5, lambda t: window(1, 0.1))
    report = short.result(T0 + 100)
    assert report["evaluated"] is False and "shorter than warm-up + 2 x window (110 s)" in report["reason"]


def test_drift_memory_is_bounded_whatever_the_length():
    tracker = DriftTracker(T0, window_s=40, warmup_s=0)
    feed(tracker, 5000, 1, lambda t: window(1, 0.1))
    assert len(tracker._late) <= SEGMENTS + 1
    report = tracker.result(T0 + 5000)
    assert report["early"]["requests_ok"] == 40 and 30 <= report["late"]["requests_ok"] <= 40


def summary_of(w: WindowMetrics, duration_s: float = 100.0, **extra) -> dict:
    """The parts of a summary.json the verdict reads."""
    base = {"metrics": metric_stats(w), "throughput": throughput(w, duration_s), "run": {"workers_lost": []}}
    return {**base, **extra}


def test_verdict_passes_a_clean_run_and_names_each_failed_gate():
    clean = summary_of(window(99, 0.1, failed=1))
    v = verdict(clean, parse_slos(["ttft_p99_ms=200"]), max_error_rate=0.02)
    assert v == {
        "passed": True,
        "reasons": [],
        "slo": [{"slo": "ttft_p99_ms=200", "value_ms": 100.031, "max_ms": 200.0, "ok": True}],
        "error_rate": 0.01,
        "max_error_rate": 0.02,
        "max_drift_pct": None,
        "accuracy": None,
        "min_accuracy": None,
        "client_limited": False,
        "exit_code": 0,
    }
    bad = summary_of(
        window(90, 0.3, failed=10),
        run={"workers_lost": ["w2"]},
        client={"cpu_saturated": ["w1"]},
        drift={"evaluated": False, "reason": "run of 100 s is shorter than ..."},
    )
    v = verdict(bad, parse_slos(["ttft_p99_ms=200,tpot_p50_ms=50"]), max_error_rate=0.05, max_drift_pct=10)
    assert v["passed"] is False and v["exit_code"] == EXIT_GATE_FAILED
    assert v["reasons"] == [
        "error rate 0.1000 (10 of 100 requests) > --max-error-rate 0.05",
        "SLO ttft_p99_ms=200 not met: 300.031 ms",
        "--max-drift-pct set but no drift computed: run of 100 s is shorter than ...",
        "worker lost: 1 worker(s) stopped reporting (w2)",
        "client saturated: w1 short of CPU (sustained CPU near one core, with event-loop lag; measurements "
        "unreliable; add workers)",
    ]
    assert [r["ok"] for r in v["slo"]] == [False, True]


def test_verdict_drift_gate_and_a_run_without_any_success():
    tracker = DriftTracker(T0, window_s=100, warmup_s=0)
    feed(tracker, 300, 10, lambda t: window(10, 0.1 if t < 200 else 0.13))
    summary = summary_of(window(10, 0.1), drift=tracker.result(T0 + 300))
    assert verdict(summary, max_drift_pct=35)["passed"] is True
    v = verdict(summary, max_drift_pct=20)
    assert v["reasons"] == ["drift: ttft_ms_p50 +30.0 % worse (early 100.031, late 130.047) > --max-drift-pct 20"]

    nothing = summary_of(window(0, 0.1, failed=3))
    assert verdict(nothing)["reasons"] == ["no request succeeded"]
    assert verdict(nothing, max_error_rate=0.01)["reasons"] == ["no request succeeded"]  # says it once


def test_without_max_error_rate_a_run_where_most_requests_failed_does_not_pass():
    """The default limit (`DEFAULT_MAX_ERROR_RATE`, one for the verdict, the steps and the search) applies when
    --max-error-rate is not given or left empty (the web UI's field); 1 turns it off."""
    from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE

    objectives = Settings.from_options(options()).objectives
    assert objectives.max_error_rate == DEFAULT_MAX_ERROR_RATE == 0.01
    options_left_empty = options()
    options_left_empty.max_error_rate = ""
    assert Settings.from_options(options_left_empty).objectives.max_error_rate == DEFAULT_MAX_ERROR_RATE
    malformed = summary_of(window(14, 0.1, failed=88))  # most streams malformed
    v = verdict(malformed, max_error_rate=objectives.max_error_rate)
    assert v["reasons"] == ["error rate 0.8627 (88 of 102 requests) > --max-error-rate 0.01"]
    assert v["exit_code"] == EXIT_GATE_FAILED
    off = Settings.from_options(options("--max-error-rate", "1")).objectives.max_error_rate
    assert verdict(malformed, max_error_rate=off)["passed"] is True
    assert verdict(summary_of(window(99, 0.1, failed=1)), max_error_rate=objectives.max_error_rate)["passed"]


def test_exit_code_keeps_an_earlier_error_and_otherwise_follows_the_cause_and_the_verdict():
    """The exit-code policy (results/outcome.py), from plain values: always a code, never Locust's own left."""
    from llm_locust.metrics.gates import EXIT_INTERRUPTED
    from llm_locust.results.outcome import exit_code

    passed = {"passed": True, "exit_code": 0}
    failed = {"passed": False, "exit_code": EXIT_GATE_FAILED}
    interrupted = {"passed": False, "exit_code": EXIT_INTERRUPTED}
    assert exit_code(None, None, False, passed) == 0  # failed requests within the gate: not Locust's 1
    assert exit_code(None, None, False, failed) == EXIT_GATE_FAILED
    assert exit_code(2, None, False, failed) == 2  # a config error's code is kept
    assert exit_code(2, None, False, passed) == 2
    assert exit_code(None, "connect", False, failed) == 2  # nothing succeeded, the command is wrong
    assert exit_code(None, "http_5xx", False, failed) == 1  # nothing succeeded, the server's fault
    assert exit_code(None, "http_5xx", True, interrupted) == EXIT_INTERRUPTED
    assert exit_code(None, "tls", True, interrupted) == 2  # a wrong command says so even when interrupted
    assert exit_code(0, "http_5xx", False, failed) == 1  # 0 is no error's code
    assert exit_code(None, None, False, passed, task_errors=1) == 1  # a task raised: --exit-code-on-error
    assert exit_code(None, None, False, failed, task_errors=1) == EXIT_GATE_FAILED  # the verdict's comes first


def test_behind_schedule_warns_above_the_lag_only_with_requests():
    from llm_locust.metrics.step_check import SCHEDULE_LAG_MS
    from llm_locust.results.outcome import behind_schedule

    assert behind_schedule(T0, {"count": 0, "p90": None}) is None
    assert behind_schedule(T0, {"count": 10, "p90": SCHEDULE_LAG_MS}) is None
    warning = behind_schedule(T0, {"count": 10, "p90": 250.4})
    assert warning is not None and warning.startswith("open loop fell behind its schedule from ")
    assert "p90 client queue delay 250 ms" in warning and warning.endswith("the offered rate was not achieved")


def test_lost_workers_leave_out_those_that_quit_with_the_masters_interrupt():
    from llm_locust.results.outcome import INTERRUPT_GRACE_S, lost_workers

    goodbyes = {"early": T0, "with_ctrl_c": T0 + 100 - INTERRUPT_GRACE_S / 2}
    assert lost_workers(["silent"], goodbyes, None) == {"silent", "early", "with_ctrl_c"}  # never interrupted
    assert lost_workers(["silent"], goodbyes, T0 + 100) == {"silent", "early"}
    assert lost_workers([], {}, T0) == set()


def test_bad_gate_options_are_one_line_errors():
    for args, message in ((("--max-error-rate", "5"), "--max-error-rate must be a fraction in [0, 1]"),
                          (("--max-drift-pct", "-1"), "--max-drift-pct must be >= 0"),
                          (("--drift-window-s", "0"), "--drift-window-s must be > 0")):  # fmt: skip
        with pytest.raises(ConfigError, match=re.escape(message)):
            Settings.from_options(options(*args))
