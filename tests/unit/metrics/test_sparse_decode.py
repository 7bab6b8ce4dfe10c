"""A master's decoding of workers' histograms (`decode_histograms`, `SparseHistogram`) equals hdrh's own decoding."""

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from llm_locust.metrics.hdr import (
    _SUB_BUCKET_HALF_COUNT_MAGNITUDE,
    SparseHistogram,
    add_histogram,
    counts_index,
    cumulative_counts,
    decode_histograms,
    new_histogram,
    record_values,
)
from llm_locust.metrics.recorder import delta_from_wire
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.vocabulary import COUNT_METRICS
from llm_locust.metrics.window import WindowMetrics


def filled(metric: str, rng: np.random.Generator, kind: int) -> HdrHistogram:
    """A histogram of `metric` filled one of several ways: narrow, the whole range, zeros, the top value, one value,
    heavy-tailed; with some very large counts."""
    hist = new_histogram(metric)
    top = hist.highest_trackable_value
    n = int(rng.integers(1, 3000))
    values = [
        rng.integers(0, 3000, n),
        rng.integers(0, top, n),
        np.zeros(n, dtype=np.int64),
        np.full(n, top),
        np.array([rng.integers(0, top)]),
        (rng.pareto(1.5, n) * 10_000).astype(np.int64).clip(0, top),
    ][kind % 6]
    record_values(hist, values.astype(np.int64))
    if kind % 7 == 0:
        hist.record_value(int(rng.integers(0, top)), 10**15)  # an 8-byte varint: 64-bit decoding
    return hist


def same(sparse: SparseHistogram | HdrHistogram, hdrh: HdrHistogram, metric: str) -> None:
    """`sparse` adds, reads and exports as hdrh's decoding of the same histogram."""
    ours, theirs = new_histogram(metric), new_histogram(metric)
    ours.record_value(17)
    theirs.record_value(17)
    add_histogram(ours, sparse)
    theirs.add(hdrh)
    assert np.array_equal(np.frombuffer(ours.counts, np.uint64), np.frombuffer(theirs.counts, np.uint64))
    assert (ours.total_count, ours.get_min_value(), ours.get_max_value()) == (
        theirs.total_count, theirs.get_min_value(), theirs.get_max_value()
    )  # fmt: skip
    assert (sparse.get_total_count(), sparse.get_min_value(), sparse.get_max_value()) == (
        hdrh.get_total_count(), hdrh.get_min_value(), hdrh.get_max_value()
    )  # fmt: skip
    bounds = counts_index(
        hdrh, np.array([1, 100, 2048, 5000, 10**6, 10**9], dtype=np.int64).clip(0, hdrh.highest_trackable_value)
    )
    assert np.array_equal(cumulative_counts(sparse, bounds), cumulative_counts(hdrh, bounds))


@pytest.mark.parametrize("seed", range(12))
def test_decoded_together_as_hdrh_decodes_each(seed):
    rng = np.random.default_rng(seed)
    metrics = [("output_tokens" if i % 3 == 0 else "itl") for i in range(int(rng.integers(1, 30)))]
    encoded = [(m, filled(m, rng, seed + i).encode()) for i, m in enumerate(metrics)]
    decoded = decode_histograms(encoded)
    assert all(isinstance(h, SparseHistogram) for h in decoded)
    for (metric, wire), hist in zip(encoded, decoded, strict=True):
        same(hist, HdrHistogram.decode(wire), metric)


def test_a_count_beyond_8_varint_bytes_or_another_geometry_is_decoded_by_hdrh():
    huge = new_histogram("ttft")
    huge.record_value(5_000, 2**60)  # a 9-byte varint
    other = HdrHistogram(1, 60_000_000, 2)  # not `new_histogram`'s range and precision
    other.record_value(123)
    plain = new_histogram("ttft")
    plain.record_value(42)
    decoded = decode_histograms([("ttft", huge.encode()), ("ttft", other.encode()), ("ttft", plain.encode())])
    assert [type(h) for h in decoded] == [HdrHistogram, HdrHistogram, SparseHistogram]
    assert decoded[0].get_total_count() == 2**60
    same(decoded[2], plain, "ttft")


def test_the_geometry_assumed_is_new_histograms():
    for metric in ("ttft", *COUNT_METRICS):
        hist = new_histogram(metric)
        assert (hist.sub_bucket_half_count_magnitude, hist.unit_magnitude) == (_SUB_BUCKET_HALF_COUNT_MAGNITUDE, 0)


def test_a_merged_wire_delta_equals_the_merged_windows():
    rng = np.random.default_rng(3)
    windows = []
    for _ in range(4):
        window = WindowMetrics()
        for metric in ("ttft", "itl", "output_tokens"):
            window.hist[metric] = filled(metric, rng, int(rng.integers(0, 6)))
            window.sums[metric] = 1
        window.requests_ok = 5
        windows.append(window)
    wire = {"windows": {f"{1000 + 5 * i}:-1:1:-1": w.to_wire() for i, w in enumerate(windows)}, "groups": {}}
    run = RunMetrics()
    run.merge_delta(delta_from_wire(wire))
    union = WindowMetrics()
    for window in windows:
        union.merge(window)
    assert run.total.requests_ok == 20
    for metric in ("ttft", "itl", "output_tokens"):
        assert np.array_equal(
            np.frombuffer(run.total.hist[metric].counts, np.uint64), np.frombuffer(union.hist[metric].counts, np.uint64)
        )
        assert run.total.distribution(metric) == union.distribution(metric)
