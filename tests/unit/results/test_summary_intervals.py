"""summary.json's intervals (results/sections.metric_stats, results/summary.batch_scopes): one beside each percentile,
read from the histogram, widened by the time windows' batches of the run or of the step that holds them."""

from __future__ import annotations

import math

import numpy as np

from llm_locust.load.arrivals import Step, StepSpan
from llm_locust.metrics.hdr import record_values
from llm_locust.metrics.intervals import Batches, quantile_interval_ms
from llm_locust.metrics.vocabulary import PERCENTILES, ci_key, pct_key
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.sections import metric_distributions, metric_stats
from llm_locust.results.summary import batch_scopes


def test_summary_distributions_carry_an_interval_beside_each_percentile() -> None:
    window = WindowMetrics()
    record_values(window.hist["ttft"], np.random.default_rng(1).lognormal(math.log(50_000.0), 0.5, 3_000).astype(int))
    stats = metric_stats(window)["ttft_ms"]
    keys = list(stats)
    for p in PERCENTILES:
        low, high = stats[ci_key(p)]
        assert keys.index(ci_key(p)) == keys.index(pct_key(p)) + 1
        assert low is not None and low <= stats[pct_key(p)] <= (high if high is not None else math.inf)
        assert (low, high) == quantile_interval_ms(window.hist["ttft"], p / 100.0)
    assert stats["p99_9_ci95"][1] is None  # 3,000 values do not bound p99.9 from above
    assert metric_stats(WindowMetrics())["output_tokens"]["p50_ci95"] is None


def test_a_snapshot_has_the_distributions_without_intervals() -> None:
    """`intervals=False` (a summary snapshot taken while the test runs): the same distributions, no interval keys."""
    window = WindowMetrics()
    record_values(window.hist["ttft"], np.random.default_rng(3).lognormal(math.log(50_000.0), 0.5, 2_000).astype(int))
    snapshot, final = metric_stats(window, intervals=False), metric_stats(window)
    assert snapshot == metric_distributions(window)
    assert snapshot["ttft_ms"] == {key: value for key, value in final["ttft_ms"].items() if not key.endswith("_ci95")}
    assert all(not key.endswith("_ci95") for stats in snapshot.values() for key in stats)


def test_window_batches_widen_the_summary_interval() -> None:
    batches = Batches()
    window = WindowMetrics()
    rng = np.random.default_rng(5)
    medians = []
    for _ in range(10):  # ten windows whose p50 swings by ~5 ms: far more than 1,000 independent values allow
        part = WindowMetrics()
        record_values(part.hist["ttft"], rng.normal(rng.normal(50_000, 5_000), 500, 100).astype(int))
        batches.add((None, 0), metric_distributions(part))
        medians.append(metric_distributions(part)["ttft_ms"]["p50"])
        window.merge(part)
    # the first and last window are left out (the start's quick requests, the drain's slow ones); p99: 100 < 500 values
    assert batches.of(0)["ttft_ms"]["p50"] == medians[1:-1] and "p99" not in batches.of(0)["ttft_ms"]
    plain = metric_stats(window)["ttft_ms"]["p50_ci95"]
    wide = metric_stats(window, batches.of(None))["ttft_ms"]["p50_ci95"]
    assert wide[0] < plain[0] and wide[1] > plain[1] and wide[1] - wide[0] > 3 * (plain[1] - plain[0])
    assert batches.of(3) == {}


def test_a_window_is_a_batch_of_the_step_that_holds_it_whole() -> None:
    step = Step(index=2, users=1, rate_per_s=None, duration_s=20.0, warmup_s=5.0)
    span = StepSpan(step, start_s=100.0, measure_from_s=105.0, end_s=120.0)
    assert batch_scopes(104.0, 1.0, [span]) == (None,)  # warm-up
    assert batch_scopes(105.0, 1.0, [span]) == (None, 2)
    assert batch_scopes(119.5, 1.0, [span]) == (None,)  # past the step's end
    assert batch_scopes(130.0, 1.0, [span, StepSpan(step, 125.0, 125.0)]) == (None, 2)  # still running
