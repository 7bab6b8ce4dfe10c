"""SLO syntax and checks (pure)."""

from __future__ import annotations

import pytest

from llm_locust.errors import ConfigError
from llm_locust.metrics.slo import Slo, evaluate, parse_slo, parse_slos, request_meets


def test_parse_forms() -> None:
    assert parse_slo("ttft_p90_ms=2000") == Slo("ttft", "p90", 2000.0)
    assert parse_slo(" TPOT_P99_9_ms=12.5 ") == Slo("tpot", "p99_9", 12.5)
    assert parse_slos(["ttft_p90_ms=2000,e2e_mean_ms=9000", "itl_max_ms=100"]) == (
        Slo("ttft", "p90", 2000.0),
        Slo("e2e", "mean", 9000.0),
        Slo("itl", "max", 100.0),
    )
    assert str(parse_slo("e2e_p50_ms=8000")) == "e2e_p50_ms=8000"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttft<2000", "expected METRIC_STAT_ms=VALUE"),
        ("ttft_p90_s=2", "expected METRIC_STAT_ms=VALUE"),
        ("foo_p90_ms=1", "unknown metric 'foo'"),
        ("ttft_p42_ms=1", "unknown statistic 'p42'"),
        ("ttft_p90_ms=fast", "'fast' is not a number"),
        ("ttft_p90_ms=-5", "must be > 0"),
    ],
)
def test_parse_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_slo(text)
    assert "\n" not in str(info.value) and repr(text) in str(info.value)


def test_evaluate_against_a_metrics_object() -> None:
    metrics = {"ttft_ms": {"p90": 1500.0, "count": 10}, "tpot_ms": {"p99": 60.0}, "e2e_ms": {"p50": None}}
    results = evaluate(parse_slos(["ttft_p90_ms=2000", "tpot_p99_ms=50", "e2e_p50_ms=1"]), metrics)
    assert [(r.value_ms, r.ok) for r in results] == [(1500.0, True), (60.0, False), (None, False)]
    assert results[1].as_dict() == {"slo": "tpot_p99_ms=50", "value_ms": 60.0, "max_ms": 50.0, "ok": False}


def test_request_meets_every_objective() -> None:
    slos = parse_slos(["ttft_p90_ms=200", "tpot_p99_ms=20"])
    assert request_meets(slos, {"ttft": 150.0, "tpot": 19.0})
    assert not request_meets(slos, {"ttft": 250.0, "tpot": 19.0})
    assert request_meets(slos, {"ttft": 150.0, "tpot": None})  # one-token answer: no TPOT
