"""Exact, mergeable LLM metrics: histograms and counters per time window, worker deltas, merge.

Data flow: each process that runs users has a `MetricsRecorder`; every finished request
(`RequestRecord`) lands in the window of its completion time (wall clock, `interval_s`
wide). A worker ships the windows it filled since its last report as a delta (`to_wire`);
the master (or a local runner, in process) merges deltas into `RunMetrics`, which keeps the
run totals plus the windows not yet written to the time series.

Breakdowns: a request whose record names `groups` — (dimension, label) pairs such as
("replica", "2") or ("prompt_tokens", "512-1023") — also counts in one window per pair and
sweep step (`GroupKey`), merged like the steps: warm-up requests of a step are left out.

Latency histograms hold integer microseconds (HdrHistogram, 3 significant digits: <= 0.1 %
error, 1 µs .. 1 h); the output-token histogram holds tokens. Failed requests count in
`failures` by kind; their latencies never enter the successes' distributions (only their TTFT,
in its own `ttft_failed` histogram). Cancelled requests (closed early by the client on purpose) count in
`requests_cancelled`: their TTFT with the successes', their E2E and output tokens in histograms of their own.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from llm_locust.metrics import declarations
from llm_locust.metrics.declarations import LatencyMetric, Outcome
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.slo import Slo, request_meets
from llm_locust.metrics.vocabulary import COUNT_METRICS, PERCENTILES, pct_key

_HIGHEST_US = 3_600_000_000
_HIGHEST_COUNT = 10_000_000


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
    cumulative = np.cumsum(np.ctypeslib.as_array(hist.counts)[: hist.counts_len])
    targets = [hist.get_target_count_at_percentile(p) for p in percentiles]
    indices = np.searchsorted(cumulative, targets, side="left")
    top = hist.get_max_value()
    return [min(hist.get_highest_equivalent_value(hist.get_value_from_index(int(i))), top) for i in indices]


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
        cumulative = np.concatenate(([0], np.cumsum(hist.counts, dtype=np.int64)))
        return cumulative[np.searchsorted(hist.index, bounds_index, side="right")]
    cumulative = np.cumsum(np.ctypeslib.as_array(hist.counts)[: hist.counts_len], dtype=np.int64)
    return cumulative[bounds_index]


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
    return _HIGHEST_COUNT if metric in COUNT_METRICS else _HIGHEST_US


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


_MAX = {"merge": "max"}
"""`field` metadata of a counter that keeps the larger value when windows merge (instead of the sum)."""


@dataclass
class Counts:
    """The counters of a set of requests. `merge` and the worker -> master wire follow the fields (a number is
    summed, or kept at the larger with `_MAX`; a Counter adds up by key): a new counter is one field here and its line
    in `WindowMetrics.add` (or, for a count that is no request's, in a `MetricsRecorder` method: `paused`)."""

    requests_ok: int = 0
    requests_cancelled: int = 0  # closed early by the client on purpose (--cancel-rate): neither ok nor failed
    requests_good: int = 0  # successful requests that met every --slo (goodput)
    output_tokens: int = 0
    prompt_tokens: int = 0
    token_events: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    token_sources: Counter[str] = field(default_factory=Counter)
    usage_event_mismatches: int = 0  # successful requests whose usage count != token events
    reasoning_tokens: int = 0  # usage.completion_tokens_details.reasoning_tokens, summed
    prompt_checks: int = 0  # successful requests with both the client's and the server's prompt count
    prompt_mismatches: int = 0  # ... of which the counts differ
    prompt_max_abs_diff: int = field(default=0, metadata=_MAX)  # largest |server - client| prompt-token difference
    inputs: int = 0  # embeddings: inputs embedded by successful requests
    output_checks: int = 0  # successful requests with both usage.completion_tokens and the --tokenizer count
    output_mismatches: int = 0  # ... of which the counts differ
    output_diff_sum: int = 0  # sum of (client - server) output-token differences
    output_abs_diff_sum: int = 0  # sum of |client - server|
    output_max_abs_diff: int = field(default=0, metadata=_MAX)  # largest |client - server|
    prefix_blocks: int = 0  # shared prompt blocks sent, every request (failed too): see RequestRecord
    prefix_blocks_seen: int = 0  # ... of which seen before: expected reuse = prefix_blocks_seen / prefix_blocks
    connections_new: int = 0  # requests sent on a connection opened for them
    connections_reused: int = 0  # ... on a kept-alive connection
    retried_stale: int = 0  # requests sent again on a new connection: the kept-alive one was closed before any byte
    agent_sessions: int = 0  # agent sessions that ended (on their last request), whatever their outcome
    agent_sessions_failed: int = 0  # ... of which one step failed (it ended the session)
    tool_calls: int = 0  # tool calls in successful answers
    backoff_pauses: int = 0  # pauses of closed-loop users after a failure without an answer (`load.backoff`)
    backoff_s: float = 0.0  # ... their seconds, summed over users (`MetricsRecorder.paused`)
    answers_scored: int = 0  # successful requests whose answer was scored (`metrics.scoring`)
    answers_correct: int = 0  # ... of which the score was 1 (right)
    answer_score_sum: float = 0.0  # ... their scores, summed: accuracy = answer_score_sum / answers_scored

    @property
    def requests_failed(self) -> int:
        """Failed requests, all kinds."""
        return sum(self.failures.values())

    @property
    def requests_finished(self) -> int:
        """Requests that ended: successful, failed or cancelled."""
        return self.requests_ok + self.requests_failed + self.requests_cancelled

    def merge(self, other: Counts) -> None:
        """Add `other`'s counters to these."""
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in _MAXED:
            setattr(self, name, max(getattr(self, name), getattr(other, name)))
        for name in _TALLIES:
            getattr(self, name).update(getattr(other, name))

    def to_wire(self) -> dict[str, Any]:
        """The counters by name (a Counter as a dict): msgpack-able; `set_from_wire` reverses it."""
        wire: dict[str, Any] = {name: getattr(self, name) for name in _SUMMED + _MAXED}
        wire.update((name, dict(getattr(self, name))) for name in _TALLIES)
        return wire

    def set_from_wire(self, data: dict[str, Any]) -> None:
        """Set the counters from `to_wire` output."""
        for name in _SUMMED + _MAXED:
            setattr(self, name, data[name])
        for name in _TALLIES:
            setattr(self, name, Counter(data[name]))


_TALLIES = tuple(f.name for f in fields(Counts) if f.default_factory is Counter)
_MAXED = tuple(f.name for f in fields(Counts) if f.metadata == _MAX)
_SUMMED = tuple(f.name for f in fields(Counts) if f.name not in _TALLIES + _MAXED)


def histogram_names() -> tuple[str, ...]:
    """Every histogram a time window keeps, and histograms.json holds: the declared latencies, then the counts."""
    return (*declarations.names(), *COUNT_METRICS)


_Reader = tuple[str, Callable[[RequestRecord], float | None] | None, Callable[[RequestRecord], Sequence[int]] | None]
_plan: tuple[tuple[LatencyMetric, ...], dict[Outcome, tuple[_Reader, ...]]] | None = None


def _recording_plan() -> dict[Outcome, tuple[_Reader, ...]]:
    """Per outcome, (name, read_s, values_us) of each latency recorded for it; made again when `LATENCIES` changes."""
    global _plan
    declared = declarations.LATENCIES
    if _plan is None or _plan[0] is not declared:
        plan = {o: tuple((m.name, m.read_s, m.values_us) for m in declarations.latencies(outcome=o)) for o in Outcome}
        _plan = (declared, plan)
    return _plan[1]


@dataclass
class WindowMetrics(Counts):
    """The LLM metrics of a set of requests (one time window, or a whole run): the counters, a histogram per
    declared latency and count metric, with the exact sum of each."""

    hist: Histograms = field(default_factory=Histograms)
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(histogram_names(), 0))

    def __post_init__(self) -> None:
        self._plan = _recording_plan()

    def add(self, record: RequestRecord, good: bool = True) -> None:
        """Count one finished request (`good`: it met every SLO), and record each latency declared for its
        outcome (`LatencyMetric.outcomes`) that it has."""
        self.prefix_blocks += record.prefix_blocks
        self.prefix_blocks_seen += record.prefix_blocks_seen
        if record.new_connection is not None:  # the connection it went on, failed or not (its phases: declared)
            if record.new_connection:
                self.connections_new += 1
            else:
                self.connections_reused += 1
        self.retried_stale += record.retried_stale
        agent = record.agent
        if agent is not None:
            self.agent_sessions += 1
            if agent.ok:
                self._record("agent_steps", agent.steps)
                self._record("agent_tool_calls", agent.tool_calls)
            else:
                self.agent_sessions_failed += 1
        if record.cancelled:
            self.requests_cancelled += 1
            self._record("output_tokens_cancelled", min(record.output_tokens, _HIGHEST_COUNT))
            outcome = Outcome.CANCELLED
        elif not record.ok:
            self.failures[str(record.error_kind)] += 1
            outcome = Outcome.FAILED
        else:
            self._add_ok(record, good)
            outcome = Outcome.OK
        hist, sums = self.hist, self.sums
        for name, read_s, values_us in self._plan[outcome]:
            if read_s is not None:
                value_s = read_s(record)
                if value_s is not None:
                    value_us = _us(value_s)
                    hist[name].record_value(value_us)
                    sums[name] += value_us
            else:
                values = values_us(record)
                if values:
                    many_us = np.minimum(np.asarray(values, dtype=np.int64), _HIGHEST_US)
                    record_values(hist[name], many_us)
                    sums[name] += int(many_us.sum())

    def _add_ok(self, record: RequestRecord, good: bool) -> None:
        """Count a successful request's tokens and checks (its latencies: `add`)."""
        n = record.output_tokens
        self.requests_ok += 1
        self.requests_good += good
        self.output_tokens += n
        self.prompt_tokens += record.prompt_tokens or 0
        self.inputs += record.inputs
        self.token_events += record.events
        self.token_sources[str(record.token_source)] += 1
        if record.usage_completion_tokens is not None and record.usage_completion_tokens != record.events:
            self.usage_event_mismatches += 1
        self.reasoning_tokens += record.reasoning_tokens or 0
        self.tool_calls += len(record.tool_calls)
        if record.score is not None:
            self.answers_scored += 1
            self.answers_correct += record.score >= 1.0
            self.answer_score_sum += record.score
        if record.expected_prompt_tokens is not None and record.prompt_tokens is not None:
            self.prompt_checks += 1
            diff = abs(record.prompt_tokens - record.expected_prompt_tokens)
            if diff:
                self.prompt_mismatches += 1
                self.prompt_max_abs_diff = max(self.prompt_max_abs_diff, diff)
        if record.local_output_tokens is not None and record.usage_completion_tokens is not None:
            self._check_output(record.local_output_tokens - record.usage_completion_tokens)
        if record.t_first is not None:  # an embeddings request has no output tokens
            self._record("output_tokens", min(n, _HIGHEST_COUNT))

    def _check_output(self, diff: int) -> None:
        """Count one request whose local output-token count is `diff` tokens above the server's."""
        self.output_checks += 1
        if diff:
            self.output_mismatches += 1
            self.output_diff_sum += diff
            self.output_abs_diff_sum += abs(diff)
            self.output_max_abs_diff = max(self.output_max_abs_diff, abs(diff))

    def _record(self, metric: str, value: int) -> None:
        self.hist[metric].record_value(value)
        self.sums[metric] += value

    def distribution(self, metric: str, scale: float = 1.0) -> dict[str, float | int | None]:
        """`distribution` of one metric of this window (its histogram with its exact sum)."""
        return distribution(self.hist.get(metric), self.sums[metric], scale)

    def merge(self, other: WindowMetrics) -> None:
        """Add `other`'s requests to this window."""
        for name, h in other.hist.items():
            if h.get_total_count():
                add_histogram(self.hist[name], h)
                self.sums[name] += other.sums[name]
        super().merge(other)

    def release(self) -> None:
        """Free the histograms' memory as soon as this window is dropped (see `release_histogram`)."""
        for hist in self.hist.values():
            if isinstance(hist, HdrHistogram):
                release_histogram(hist)

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-able dict (what a worker sends), every key a name: the non-empty histograms and their sums by
        metric, the counters by field (`Counts.to_wire`); `from_wire` reverses it."""
        filled = [name for name, h in self.hist.items() if h.get_total_count()]
        return {
            "hist": {name: self.hist[name].encode() for name in filled},
            "sums": {name: self.sums[name] for name in filled},
            "counts": super().to_wire(),
        }

    @classmethod
    def from_wire(
        cls, data: dict[str, Any], decoded: Sequence[HdrHistogram | SparseHistogram] | None = None
    ) -> WindowMetrics:
        """Rebuild a window from `to_wire` output; `decoded`: its histograms, decoded already (`decode_histograms`, in
        the order of `data["hist"]`): a window only merged into others and exported, a master's (`delta_from_wire`)."""
        window = cls()
        for name in data["hist"]:
            window.sums[name] = data["sums"][name]
        if decoded is None:
            decoded = [HdrHistogram.decode(encoded) for encoded in data["hist"].values()]
        window.hist.update(zip(data["hist"], decoded, strict=True))
        window.set_from_wire(data["counts"])
        return window


def _us(seconds: float | None) -> int:
    """Seconds to whole microseconds, within the histograms' range."""
    return min(max(0, round(seconds * 1e6)), _HIGHEST_US) if seconds is not None else 0


class WindowKey(NamedTuple):
    """Where a finished request's metrics go: the time window of its completion (start, epoch
    s), the sweep step it was sent in (-1: none), whether it was sent after the step's warm-up floor, and the window it
    was sent in (its start, epoch s; -1 outside steps: a step's measured window is found by send time,
    `metrics.step_windows`)."""

    start: int
    step: int
    measured: bool
    sent: int = -1


class ProcessLatency:
    """One declared latency (`name`) of the requests one process finished in a test: that process's own
    distribution (a master merges every process's windows into one; this says how each process did — an open loop's
    send error per worker)."""

    def __init__(self, name: str) -> None:
        (metric,) = declarations.pick(name)
        self._read_s = metric.read_s
        self.name = name
        self.sum_us = 0
        self.hist = new_histogram(name)

    def add(self, record: RequestRecord) -> None:
        """Count `record`'s value, if it has one."""
        value_s = self._read_s(record) if self._read_s is not None else None
        if value_s is not None:
            value_us = _us(value_s)
            self.hist.record_value(value_us)
            self.sum_us += value_us

    def distribution_ms(self) -> dict[str, float | int | None]:
        """`distribution` of the values so far, in ms."""
        return distribution(self.hist, self.sum_us, scale=1000.0)


class GroupKey(NamedTuple):
    """One breakdown of the run: the requests of `label` along `dimension` sent in sweep step
    `step` (-1: none)."""

    dimension: str
    label: str
    step: int


@dataclass
class Delta:
    """What one process measured since its last report: its time windows and its breakdowns
    (the same requests again, by group)."""

    windows: dict[WindowKey, WindowMetrics] = field(default_factory=dict)
    groups: dict[GroupKey, WindowMetrics] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.windows)

    @property
    def requests(self) -> int:
        """Requests in the delta, successful, failed or cancelled (each once)."""
        return sum(w.requests_finished for w in self.windows.values())

    def release(self) -> None:
        """Free every window's histograms (the delta was sent)."""
        for window in (*self.windows.values(), *self.groups.values()):
            window.release()


def window_start(t_wall_s: float, interval_s: float) -> int:
    """Start (epoch seconds, whole) of the window of `interval_s` seconds holding wall-clock time `t_wall_s`."""
    return int(math.floor(t_wall_s / interval_s) * interval_s)


class MetricsRecorder:
    """Per-process collector: finished requests into windows keyed by `WindowKey`.

    `slos` decide which successful requests are good (goodput): every objective met by the
    request's own value of its latency (`LatencyMetric.request_ms`: for the ITL, its largest gap).
    """

    def __init__(self, interval_s: float, slos: tuple[Slo, ...] = ()) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval_s}")
        self.interval_s = interval_s
        self.slos = slos
        named = {slo.metric for slo in slos}
        self._judged = tuple(m for m in declarations.latencies(slo=True) if m.name in named)  # what goodput reads
        self._pending = Delta()

    def window_start(self, t_wall_s: float) -> int:
        """Start (epoch seconds, whole) of the window holding wall-clock time `t_wall_s`."""
        return window_start(t_wall_s, self.interval_s)

    def record(self, record: RequestRecord, t_wall_s: float, t_sent_wall_s: float | None = None) -> None:
        """Add a finished request, completed at wall-clock `t_wall_s` (time.time()) and sent at `t_sent_wall_s`
        (None: at `t_wall_s`)."""
        good = self._good(record)
        start = self.window_start(t_wall_s)
        sent = -1 if record.step < 0 else self.window_start(t_wall_s if t_sent_wall_s is None else t_sent_wall_s)
        _window(self._pending.windows, WindowKey(start, record.step, record.measured, sent)).add(record, good)
        if record.groups and (record.step < 0 or record.measured):
            for dimension, label in record.groups:
                _window(self._pending.groups, GroupKey(dimension, label, record.step)).add(record, good)

    def paused(self, seconds: float, t_wall_s: float, step: int = -1, measured: bool = True) -> None:
        """Count one pause of a user backing off (`load.backoff`) that lasted `seconds` and ended at wall-clock
        `t_wall_s` (time.time()), after a request of sweep step `step` (`measured`: sent after its warm-up)."""
        start = self.window_start(t_wall_s)
        window = _window(self._pending.windows, WindowKey(start, step, measured, start if step >= 0 else -1))
        window.backoff_pauses += 1
        window.backoff_s += seconds

    def _good(self, record: RequestRecord) -> bool:
        """True when `record` succeeded and met every SLO, each judged by the request's own value of the latency
        (`LatencyMetric.request_ms`)."""
        if not self.slos or not record.ok:
            return record.ok
        return request_meets(self.slos, {m.name: m.request_ms(record) for m in self._judged})

    def take_delta(self) -> Delta:
        """The windows filled since the last call (and forget them)."""
        delta, self._pending = self._pending, Delta()
        return delta


def _window(windows: dict[Any, WindowMetrics], key: Any) -> WindowMetrics:
    """`windows[key]`, created empty when missing."""
    window = windows.get(key)
    if window is None:
        window = windows[key] = WindowMetrics()
    return window


def delta_to_wire(delta: Delta) -> dict[str, Any]:
    """A recorder delta as a msgpack-able dict with string keys: windows as "start:step:measured:sent",
    groups as "step:dimension:label" (a label may hold ":", a dimension may not)."""
    return {
        "windows": {f"{k.start}:{k.step}:{int(k.measured)}:{k.sent}": w.to_wire() for k, w in delta.windows.items()},
        "groups": {f"{k.step}:{k.dimension}:{k.label}": w.to_wire() for k, w in delta.groups.items()},
    }


def delta_from_wire(data: dict[str, Any]) -> Delta:
    """Reverse of `delta_to_wire`; every histogram of the delta decoded at once, sparse (`decode_histograms`): a
    delta is merged into a run's windows, never added to."""
    windows = [
        (WindowKey(int(start), int(step), measured == "1", int(sent)), window)
        for start, step, measured, sent, window in ((*key.split(":"), w) for key, w in data["windows"].items())
    ]
    groups = [
        (GroupKey(dimension, label, int(step)), window)
        for step, dimension, label, window in ((*key.split(":", 2), w) for key, w in data["groups"].items())
    ]
    decoded = iter(decode_histograms([item for _, w in windows + groups for item in w["hist"].items()]))
    delta = Delta()
    for key, window in windows:
        delta.windows[key] = WindowMetrics.from_wire(window, [next(decoded) for _ in window["hist"]])
    for group, window in groups:
        delta.groups[group] = WindowMetrics.from_wire(window, [next(decoded) for _ in window["hist"]])
    return delta


def merge_into(windows: dict[Any, WindowMetrics], key: Any, window: WindowMetrics) -> None:
    """Add `window` to `windows[key]` (a copy of it when the key is new: `window` is shared)."""
    _window(windows, key).merge(window)
