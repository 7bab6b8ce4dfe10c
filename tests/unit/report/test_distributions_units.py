"""The report's CDF (`report.distributions`): thinned to at most ~MAX_CDF_POINTS points, it still passes through every
percentile summary.json states (the same histogram, HdrHistogram's rule)."""

from __future__ import annotations

import numpy as np
import pytest

from llm_locust.metrics.hdr import new_histogram, quantiles, record_values
from llm_locust.metrics.vocabulary import PERCENTILES
from llm_locust.report.distributions import MAX_CDF_POINTS, cdf_points, thin_cdf


@pytest.mark.parametrize("total", [4278, 5070, 10_007, 123_457])
def test_a_thinned_cdf_passes_through_the_summarys_percentiles(total):
    """4,278 ITLs of CI's sweep: p99's target count (4,235) rounds down into the 0.001-band of the bucket before it
    (0.98995 and 0.98971), so thinning by bands of the fraction dropped the point the summary's p99 names."""
    rng = np.random.default_rng(total)
    values_us = np.rint(rng.lognormal(np.log(10_000), 0.6, total)).astype(np.int64)  # ITLs around 10 ms
    hist = new_histogram("itl")
    record_values(hist, values_us)
    values, cumulative = cdf_points(hist, 1000.0)
    assert len(values) > MAX_CDF_POINTS  # (else nothing is thinned)
    x, y = thin_cdf(values, cumulative, hist)
    assert len(x) <= MAX_CDF_POINTS + 1 and np.all(np.diff(x) > 0) and y[-1] == pytest.approx(1.0)
    for p, value_us in zip(PERCENTILES, quantiles(hist, PERCENTILES), strict=True):
        (at,) = np.flatnonzero(np.isclose(x, value_us / 1000.0, rtol=0, atol=1e-9))
        assert y[at] >= p / 100 - 0.5 / total  # the CDF reaches the percentile there (its target count rounded)
        assert at == 0 or y[at - 1] < p / 100 + 0.5 / total


def test_a_short_cdf_is_kept_whole():
    hist = new_histogram("ttft")
    record_values(hist, np.array([1000, 2000, 2000, 5000], dtype=np.int64))
    values, cumulative = cdf_points(hist, 1000.0)
    x, y = thin_cdf(values, cumulative, hist)
    assert x.tolist() == pytest.approx([1.0, 2.0, 5.0], abs=0.01) and y.tolist() == [0.25, 0.75, 1.0]
