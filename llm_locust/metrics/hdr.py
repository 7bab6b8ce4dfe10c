"""HdrHistogram primitives for the metrics: a histogram per metric with its range (`new_histogram`), the lazy set of a
window's histograms (`Histograms`), percentiles and distributions read from one, adding and recording values in bulk
(numpy), and decoding the worker -> master wire's compressed histograms (`decode_histograms`, `SparseHistogram`).

Latency histograms hold integer microseconds (HdrHistogram, 3 significant digits: <= 0.1 % error, 1 µs .. 1 h); the
output-token histogram holds tokens.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from llm_locust.metrics.vocabulary import COUNT_METRICS, PERCENTILES, pct_key

HIGHEST_US = 3_600_000_000
HIGHEST_COUNT = 10_000_000


def new_histogram(metric: str) -> HdrHistogram:
    """An empty histogram with the range of `metric` (µs for latencies, tokens for counts)."""
    return HdrHistogram(1, _highest(metric), 3)


class Histograms(dict[str, HdrHistogram]):
    """A window's histograms by metric name, each made when first recorded into or added to (`new_histogram`): an
    empty latency histogram costs ~190 KB, and most windows see few of the declared metrics (no agent session, no new
    connection). Reading a metric with `get` makes nothing. A delta decoded by a master holds `SparseHistogram`s
    instead (`delta_from_wire`)."""

    def __missing__(self, metric: str) -> HdrHistogram:
        hist = self[metric] = new_histogram(metric)
        return hist


def release_histogram(hist: HdrHistogram) -> None:
    """Let `hist`'s counts (~190 KB for a latency histogram) be freed as soon as it is dropped.

    hdrh's HdrHistogram and its encoder reference each other, so a dropped histogram otherwise
    waits for a full garbage collection — rare in a busy process: RSS grows by MBs per minute.
    Breaking the cycle leaves the histogram usable for reading, not for encoding or adding.
    """
    hist.encoder = None


def distribution(hist: HdrHistogram | None, total: int, scale: float = 1.0) -> dict[str, float | int | None]:
    """count, mean, min, p50 .. p99_9, max of `hist` (None: no histogram, nothing recorded), each value divided by
    `scale`.

    `total` is the exact sum of the recorded values (the histogram only knows buckets), so the
    mean is exact. Percentiles are `quantiles`' (hdrh's own Python loops would stall the users of the process).
    With no samples every statistic is None (count 0): "no data", never a fake zero.
    """
    count = 0 if hist is None else hist.get_total_count()
    stats: dict[str, float | int | None] = {"count": count}
    if hist is None or count == 0:
        stats.update(dict.fromkeys(("mean", "min", *(pct_key(p) for p in PERCENTILES), "max")))
        return stats
    stats["mean"] = round(total / count / scale, 3)
    stats["min"] = round(hist.get_min_value() / scale, 3)
    for p, value in zip(PERCENTILES, quantiles(hist, PERCENTILES), strict=True):
        stats[pct_key(p)] = round(value / scale, 3)
    stats["max"] = round(hist.get_max_value() / scale, 3)
    return stats


def quantiles(hist: HdrHistogram, percentiles: Sequence[float]) -> list[int]:
    """The value at each of `percentiles` (0..100) of `hist` (holding values): HdrHistogram's — the highest
    equivalent value of the bucket holding the target count, at most the largest value —, in one vectorised pass over
    the counts (hdrh's own Python loops take tens of ms per histogram)."""
    targets = [hist.get_target_count_at_percentile(p) for p in percentiles]
    indices = np.searchsorted(cumulative(hist), targets, side="left")
    top = hist.get_max_value()
    return [min(hist.get_highest_equivalent_value(hist.get_value_from_index(int(i))), top) for i in indices]


def cumulative(hist: HdrHistogram) -> np.ndarray:
    """How many values `hist` holds up to each of its buckets, inclusive — up to the bucket of its largest value (the
    later ones hold none: a latency's counts span an hour, its values rarely a minute, so the pass is a few times
    shorter). What `quantiles`, `cumulative_counts` and the percentiles' intervals read."""
    end = hist.counts_len
    if hist.max_value > 0:  # (0: not tracked, e.g. a histogram whose counts were set directly)
        end = min(end, int(counts_index(hist, np.array([hist.max_value], dtype=np.int64))[0]) + 1)
    return np.cumsum(np.ctypeslib.as_array(hist.counts)[:end], dtype=np.int64)


def counts_index(hist: HdrHistogram, values: np.ndarray) -> np.ndarray:
    """The index in `hist`'s counts of the bucket each of `values` (int64, >= 0) falls in, vectorised: what hdrh's
    `_counts_index_for` does per value. Buckets hold one value each below 2,048 (µs), then widen by powers of two
    (<= 0.1 % of the value)."""
    # bucket = bit length of (v | sub_bucket_mask) - unit magnitude - (sub-bucket half-count magnitude + 1)
    bit_length = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))[1]
    bucket = bit_length - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = values >> (bucket + hist.unit_magnitude)
    return ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + sub_bucket - hist.sub_bucket_half_count


def cumulative_counts(hist: HdrHistogram | SparseHistogram, bounds_index: np.ndarray) -> np.ndarray:
    """How many values of `hist` are in the buckets up to each of `bounds_index` (`counts_index` of each bound),
    inclusive: a bucket holding a bound counts whole (exact below 2,048; else within 0.1 % of the bound)."""
    if isinstance(hist, SparseHistogram):
        sparse = np.concatenate(([0], np.cumsum(hist.counts, dtype=np.int64)))
        return sparse[np.searchsorted(hist.index, bounds_index, side="right")]
    counts = cumulative(hist)
    return counts[np.minimum(bounds_index, len(counts) - 1)]  # (beyond the largest value: all of them)


class SparseHistogram(NamedTuple):
    """A histogram as a master decodes it from a worker's report (`delta_from_wire`): the indices of its non-zero
    buckets in `new_histogram`'s counts, ascending, their counts, its number of values and its lowest and highest
    value as hdrh reads them from a decoded histogram (the low end of the lowest bucket, the high end of the highest).
    A master only adds it to its own histograms (`add_histogram`) and counts it into the live export
    (`cumulative_counts`): a full histogram per decoded one would cost its ~190 KB of counts, allocated and zeroed
    (~100 µs), for the few hundred buckets a window fills."""

    index: np.ndarray  # int64, ascending
    counts: np.ndarray  # uint64, > 0
    total: int
    min_value: int
    max_value: int

    def get_total_count(self) -> int:
        """The number of values."""
        return self.total

    def get_min_value(self) -> int:
        """The lowest value (the low end of its bucket)."""
        return self.min_value

    def get_max_value(self) -> int:
        """The highest value (the high end of its bucket)."""
        return self.max_value


_EXTERNAL_HEADER = struct.Struct(">II")  # cookie, compressed length
_PAYLOAD_HEADER = struct.Struct(">IIIIQQd")  # cookie, payload length, index offset, digits, lowest, highest, ratio
_MAX_VARINT_BYTES = 8  # a count or a run of zeros below 2**55: what hdrh's 9-byte form never needs here


def decode_histograms(encoded: Sequence[tuple[str, str | bytes]]) -> list[SparseHistogram | HdrHistogram]:
    """Each (metric, wire form) of `encoded` decoded, as a `SparseHistogram` — hdrh's `encode` is base64 of a V2
    header and the zlib-compressed payload of the counts as ZigZag LEB128 varints, runs of zeros as negative numbers;
    the varints of all the payloads are decoded together, in one pass of numpy — or, a payload of another geometry
    or form (not made by `new_histogram`), by hdrh as a full histogram."""
    streams: list[bytes] = []
    fast: list[int] = []
    decoded: list[SparseHistogram | HdrHistogram | None] = [None] * len(encoded)
    for i, (metric, wire) in enumerate(encoded):
        raw = base64.b64decode(wire)
        _cookie, length = _EXTERNAL_HEADER.unpack_from(raw)
        data = zlib.decompress(raw[_EXTERNAL_HEADER.size : _EXTERNAL_HEADER.size + length])
        _cookie, payload_len, offset, digits, lowest, highest, _ratio = _PAYLOAD_HEADER.unpack_from(data)
        stream = data[_PAYLOAD_HEADER.size : _PAYLOAD_HEADER.size + payload_len]
        usual = (offset, digits, lowest, highest) == (0, 3, 1, _highest(metric))
        if usual and stream and stream[-1] < 0x80 and len(stream) == payload_len:
            streams.append(stream)
            fast.append(i)
        else:
            decoded[i] = HdrHistogram.decode(wire)
    if streams:
        for i, sparse in zip(fast, _decode_streams(streams), strict=True):
            decoded[i] = sparse if sparse is not None else HdrHistogram.decode(encoded[i][1])
    return decoded  # type: ignore[return-value]


def _decode_streams(streams: list[bytes]) -> list[SparseHistogram | None]:
    """The varint streams (each ending on a varint's last byte) decoded together: one `SparseHistogram` per stream
    (None where a varint is too long for this decoder, or a stream holds no count)."""
    varints = np.frombuffer(b"".join(streams), np.uint8)
    ends = np.flatnonzero(varints < 0x80).astype(np.int32)  # a varint's last byte has the high bit clear
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    lengths = (ends - starts + 1).astype(np.int32)
    # int32 when every varint fits 4 bytes (28 bits: any count of a report): arrays half as large — under the
    # allocator's 128 KB, no fresh pages for each
    wide = np.int64 if lengths.max() > 4 else np.int32
    zigzag = (varints[starts] & 0x7F).astype(wide)
    longer = np.flatnonzero(lengths > 1)  # most counts and runs of zeros fit one byte
    shift = 7
    while longer.size and shift < 7 * _MAX_VARINT_BYTES:
        zigzag[longer] |= (varints[starts[longer] + shift // 7] & 0x7F).astype(wide) << shift
        longer = longer[lengths[longer] > shift // 7 + 1]
        shift += 7
    sign = zigzag & 1
    np.negative(sign, out=sign)
    values = zigzag >> 1
    values ^= sign  # ZigZag: 2n -> n, 2n + 1 -> -n - 1 (in place: numpy's temporaries of one expression cost 10x)
    steps = np.where(values < 0, -values, 1)
    index = np.cumsum(steps, dtype=wide)  # each varint's bucket: after the zeros and counts before it
    index -= steps
    stream_ends = np.cumsum([len(stream) for stream in streams]) - 1
    last = np.searchsorted(ends, stream_ends)  # each stream's last varint
    first = np.empty_like(last)
    first[0], first[1:] = 0, last[:-1] + 1
    too_long = (
        (np.maximum.reduceat(lengths, first) > _MAX_VARINT_BYTES).tolist() if longer.size else [False] * len(streams)
    )
    filled = values > 0
    kept = np.flatnonzero(filled)
    per_stream = np.add.reduceat(filled, first, dtype=np.int64)
    kept_index = (index[kept] - np.repeat(index[first], per_stream)).astype(np.int64)  # from its stream's first
    kept_counts = values[kept].astype(np.uint64)
    bounds = np.cumsum(per_stream)
    low_bounds = bounds - per_stream
    totals = np.add.reduceat(np.maximum(values, 0), first, dtype=np.int64).tolist()
    somewhere = np.minimum(low_bounds, kept_index.size - 1)  # a stream without counts: any index (None below)
    lows = _value_from_index(kept_index[somewhere]).tolist()
    highs = (_value_from_index(kept_index[np.maximum(bounds - 1, 0)] + 1) - 1).tolist()
    result: list[SparseHistogram | None] = []
    for i, (low, high) in enumerate(zip(low_bounds.tolist(), bounds.tolist(), strict=True)):
        if too_long[i] or low == high:
            result.append(None)
        else:
            result.append(SparseHistogram(kept_index[low:high], kept_counts[low:high], totals[i], lows[i], highs[i]))
    return result


_SUB_BUCKET_HALF_COUNT_MAGNITUDE = 10  # of `new_histogram`'s geometry (3 significant digits, lowest value 1)


def _value_from_index(index: np.ndarray) -> np.ndarray:
    """The lowest value of the bucket at each of `index` in `new_histogram`'s counts: hdrh's `get_value_from_index`,
    vectorised (its bucket i + 1 starts where bucket i ends)."""
    half = 1 << _SUB_BUCKET_HALF_COUNT_MAGNITUDE
    bucket = (index >> _SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1
    sub_bucket = (index & (half - 1)) + half
    first = bucket < 0
    sub_bucket = np.where(first, sub_bucket - half, sub_bucket)
    return sub_bucket << np.maximum(bucket, 0)


def _highest(metric: str) -> int:
    """The highest value of `metric`'s histograms (`new_histogram`)."""
    return HIGHEST_COUNT if metric in COUNT_METRICS else HIGHEST_US


def _counts(hist: HdrHistogram) -> np.ndarray:
    """`hist`'s counts as a numpy view (no copy)."""
    return np.frombuffer(hist.counts, dtype=np.uint64)


def add_histogram(hist: HdrHistogram, other: HdrHistogram | SparseHistogram) -> None:
    """Add `other`'s counts to `hist` (of the same metric): what hdrh's `add` does, over `other`'s filled buckets
    only. hdrh adds every bucket, ~23,500 for a latency (30 µs a histogram); a window's values fill a few hundred."""
    if isinstance(other, SparseHistogram):
        if not other.index.size:
            return
        _counts(hist)[other.index] += other.counts
        hist.total_count += other.total
    else:
        count = other.get_total_count()
        if not count:
            return
        if other.counts_len != hist.counts_len or other.sub_bucket_count != hist.sub_bucket_count:
            hist.add(other)
            return
        low, high = counts_index(hist, np.array([other.get_min_value(), other.get_max_value()], dtype=np.int64))
        _counts(hist)[low : high + 1] += _counts(other)[low : high + 1]
        hist.total_count += count
    hist.min_value = min(hist.min_value, other.get_min_value())
    hist.max_value = max(hist.max_value, other.get_max_value())


def record_values(hist: HdrHistogram, values: np.ndarray) -> None:
    """Record every value of `values` (int64, within 0 .. the histogram's highest) into `hist`
    at once: what `hist.record_value` does per value, vectorised (hdrh's Python per-value path
    costs ~1.5 µs, once per token event for the ITL)."""
    values = values[values >= 0]
    if not values.size:
        return
    np.add.at(np.ctypeslib.as_array(hist.counts)[: hist.counts_len], counts_index(hist, values), 1)
    hist.total_count += int(values.size)
    hist.min_value = min(hist.min_value, int(values.min()))
    hist.max_value = max(hist.max_value, int(values.max()))


def whole_us(seconds: float | None) -> int:
    """Seconds to whole microseconds, within the histograms' range."""
    return min(max(0, round(seconds * 1e6)), HIGHEST_US) if seconds is not None else 0
