"""The metrics of a set of requests: its counters (`Counts`) and, per declared latency and count metric, a histogram
with its exact sum (`WindowMetrics`), filled from finished `RequestRecord`s and merged window into window.

Failed requests count in `failures` by kind; their latencies never enter the successes' distributions (only their TTFT,
in its own `ttft_failed` histogram). Cancelled requests (closed early by the client on purpose) count in
`requests_cancelled`: their TTFT with the successes', their E2E and output tokens in histograms of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from llm_locust.metrics import declarations
from llm_locust.metrics.declarations import LatencyMetric, Outcome
from llm_locust.metrics.hdr import (
    HIGHEST_COUNT,
    HIGHEST_US,
    Histograms,
    SparseHistogram,
    add_histogram,
    distribution,
    record_values,
    release_histogram,
    whole_us,
)
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.vocabulary import COUNT_METRICS

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
    output_bytes: int = 0  # decoded media bytes (images) of successful requests' answers
    input_s: float = 0.0  # seconds of media (audio) successful requests carried
    input_e2e_s: float = 0.0  # ... those requests' E2E, summed: real-time factor = input_e2e_s / input_s
    output_s: float = 0.0  # seconds of media (audio) successful requests' answers carried
    output_e2e_s: float = 0.0  # ... those requests' E2E, summed
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
    def output_bytes_per_input(self) -> float:
        """Decoded media bytes per input answered (bytes per image), 0.0 without inputs."""
        return round(self.output_bytes / self.inputs, 1) if self.inputs else 0.0

    @property
    def real_time_factor(self) -> float | None:
        """The successful requests' processing time over their media's duration (E2E summed / seconds summed, of the
        media requests carried and answers carried), None without media."""
        media_s = self.input_s + self.output_s
        return round((self.input_e2e_s + self.output_e2e_s) / media_s, 6) if media_s else None

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
            self._record("output_tokens_cancelled", min(record.output_tokens, HIGHEST_COUNT))
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
                    value_us = whole_us(value_s)
                    hist[name].record_value(value_us)
                    sums[name] += value_us
            else:
                values = values_us(record)
                if values:
                    many_us = np.minimum(np.asarray(values, dtype=np.int64), HIGHEST_US)
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
        self.output_bytes += record.output_bytes
        if record.input_s:
            self.input_s += record.input_s
            self.input_e2e_s += record.e2e_s or 0.0
        if record.output_s:
            self.output_s += record.output_s
            self.output_e2e_s += record.e2e_s or 0.0
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
            self._record("output_tokens", min(n, HIGHEST_COUNT))

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
