"""The latency metrics, each declared once: what every stage that records, ships, writes or shows a latency loops over.

A `LatencyMetric` says how to read the latency off a finished `record.RequestRecord` (the formula lives there, as a
property), which requests it is recorded for, and which views cover it. From `LATENCIES` follow: the histograms of
every `window.WindowMetrics` (and so the worker -> master wire and histograms.json), `WindowMetrics.add`, goodput
(`recorder.MetricsRecorder`), summary.json's `metrics` (`<name>_ms`), `--slo` (`slo.parse_slo`),
llm_timeseries.csv (`<name>_ms_p50` ..), the web UI's run table, live charts and tabs, the console table, and the
report's tables and charts (charts that show a chosen few pick them by name: `pick`).

Adding a latency: its property on `RequestRecord`, one `LatencyMetric` in `LATENCIES`, its definition in
docs/metrics.md. Latencies are recorded in whole µs and written in ms (`vocabulary.latency_key`).

The views read `LATENCIES` when they run (not at import), so a metric added to the tuple — by a test, too — is
covered everywhere from then on. Plain data (no Locust, no gevent, no numpy).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter

from llm_locust.metrics.record import RequestRecord


class Outcome(StrEnum):
    """How a finished request ended, as the metrics see it."""

    OK = "ok"  # succeeded: its latencies count
    FAILED = "failed"  # failed (an `ErrorKind`)
    CANCELLED = "cancelled"  # closed early by the client on purpose (--cancel-rate)


ALL_OUTCOMES = frozenset(Outcome)
SECONDS_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 300.0)
"""Upper bounds (s) of the live export's histogram buckets for a latency of ms to minutes (TTFT, E2E)."""
MILLISECONDS_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0)
"""Upper bounds (s) of the live export's histogram buckets for a latency of µs to a second (ITL, TPOT)."""
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True, slots=True)
class LatencyMetric:
    """One latency: a histogram per window, `<name>_ms` in summary.json, `<name>_ms_p90` in the time series.

    Exactly one of `read_s` and `values_us` is given:

    - `read_s(record)`: the request's latency in seconds, None when it has none (not recorded: e.g. TTFO of an
      answer without content). One value per request.
    - `values_us(record)`: pooled: every value the request contributes, whole µs (ITL: each gap). For goodput a
      request is judged by its largest value.
    """

    name: str
    """Key stem: `ttft` -> `ttft_ms`, `ttft_ms_p90`, `--slo ttft_p90_ms=..`; lower-case letters, digits and "_" (no
    "_" in one `--slo` may name: its syntax splits there)."""
    label: str
    """Short name in tables and charts ("TTFT"); the unit (ms) is added where shown."""
    read_s: Callable[[RequestRecord], float | None] | None = None
    values_us: Callable[[RequestRecord], Sequence[int]] | None = None
    outcomes: frozenset[Outcome] = frozenset({Outcome.OK})
    """The requests it is recorded for. A metric of successful requests (`Outcome.OK` among them) is in the web
    UI's run table."""
    slo: bool = False
    """A latency of successful requests that `--slo` may name: goodput and the report's step rows cover it."""
    series: bool = False
    """In llm_timeseries.csv (p50, p90, p99 per window), the live view's charts and step tables, the LLM tab, the
    console table and the report's latency-vs-load and distribution charts."""
    table_stats: tuple[str, ...] = ()
    """The statistics of it in the report's steps and comparison tables ("p50", "p90", "p99"; none: not shown)."""
    otel_name: str = ""
    """The OpenTelemetry GenAI semantic-convention instrument it is exported as (`--prometheus-port`, `--otel`),
    where one exists (e.g. "gen_ai.server.time_to_first_token"); "": `llm_locust.<name>`."""
    buckets_s: tuple[float, ...] = SECONDS_BUCKETS_S
    """Upper bounds (s) of its histogram's buckets in the live export."""

    def __post_init__(self) -> None:
        if (self.read_s is None) == (self.values_us is None):
            raise ValueError(f"latency {self.name!r}: give exactly one of read_s and values_us")
        if not _NAME.fullmatch(self.name) or (self.slo and "_" in self.name):
            raise ValueError(f"latency {self.name!r}: the name must be lower-case letters, digits and '_' (no '_' "
                             "when --slo may name it: ttft_p90_ms)")  # fmt: skip

    @property
    def instrument(self) -> str:
        """Its OpenTelemetry instrument name: `otel_name`, else `llm_locust.<name>`."""
        return self.otel_name or f"llm_locust.{self.name}"

    def request_ms(self, record: RequestRecord) -> float | None:
        """The request's own value in ms, as an SLO judges it (pooled: its largest value); None when it has none."""
        if self.read_s is not None:
            value_s = self.read_s(record)
            return None if value_s is None else value_s * 1e3
        values = self.values_us(record)
        return max(values) / 1e3 if values else None


LATENCIES: tuple[LatencyMetric, ...] = (
    LatencyMetric("ttft", "TTFT", read_s=attrgetter("ttft_s"), outcomes=frozenset({Outcome.OK, Outcome.CANCELLED}),
                  slo=True, series=True, table_stats=("p50", "p90", "p99"),
                  otel_name="gen_ai.server.time_to_first_token"),
    LatencyMetric("ttfo", "TTFO", read_s=attrgetter("ttfo_s"), slo=True),
    LatencyMetric("tpot", "TPOT", read_s=attrgetter("tpot_s"), slo=True, series=True, table_stats=("p50", "p90"),
                  otel_name="gen_ai.server.time_per_output_token", buckets_s=MILLISECONDS_BUCKETS_S),
    LatencyMetric("itl", "ITL", values_us=attrgetter("itl_us"), slo=True, series=True, table_stats=("p50", "p99"),
                  buckets_s=MILLISECONDS_BUCKETS_S),
    LatencyMetric("e2e", "E2E", read_s=attrgetter("e2e_s"), slo=True, series=True, table_stats=("p50", "p90"),
                  otel_name="gen_ai.client.operation.duration"),
    LatencyMetric("queue_delay", "client queue delay", read_s=attrgetter("queue_delay_s"), outcomes=ALL_OUTCOMES),
    LatencyMetric("ttft_failed", "TTFT of failed requests", read_s=attrgetter("ttft_s"),
                  outcomes=frozenset({Outcome.FAILED})),
    LatencyMetric("e2e_cancelled", "E2E of cancelled requests", read_s=attrgetter("e2e_s"),
                  outcomes=frozenset({Outcome.CANCELLED})),
    LatencyMetric("connect", "TCP connect", read_s=attrgetter("connect_s"), outcomes=ALL_OUTCOMES, series=True,
                  buckets_s=MILLISECONDS_BUCKETS_S),
    LatencyMetric("tls_handshake", "TLS handshake", read_s=attrgetter("tls_handshake_s"), outcomes=ALL_OUTCOMES,
                  series=True, buckets_s=MILLISECONDS_BUCKETS_S),
    LatencyMetric("upload", "request upload", read_s=attrgetter("upload_s"), outcomes=ALL_OUTCOMES),
    LatencyMetric("ttfb", "time to response headers", read_s=attrgetter("ttfb_s"), outcomes=ALL_OUTCOMES,
                  series=True),
    LatencyMetric("tool_call", "time to tool call", read_s=attrgetter("tool_call_s")),
    LatencyMetric("agent_session", "agent session duration", read_s=attrgetter("agent_session_s")),
    LatencyMetric("agent_model", "agent session: waiting for the model", read_s=attrgetter("agent_model_s")),
    LatencyMetric("agent_tool", "agent session: in tools", read_s=attrgetter("agent_tool_s")),
)  # fmt: skip
"""Every latency, in the order of summary.json, the tables and the time series: TTFT (time to first token: of
successful and cancelled requests), TTFO (first non-reasoning output), TPOT (time per output token), ITL (every gap
between token events, pooled), E2E (to the last token) — of successful requests —, the client queue delay (open
loop: how late each request was sent, whatever its outcome), the TTFT of failed requests that got a first token
(kept apart so that it never mixes into the successes'), the E2E of cancelled requests (to their last token), and the
phases of each request's connection, whatever its outcome: a new connection's TCP connect and TLS handshake (none on a
reused one), the time to send the request (upload: to its last byte handed to the kernel), and the time to the
response headers (TTFB); the time to the complete tool call(s) of a successful answer
that has one; an agent session's duration, and its time waiting for the model and in tools (on the session's last
request, when it succeeded).
Definitions: `record.RequestRecord` and docs/metrics.md."""


def latencies(*, slo: bool = False, series: bool = False, outcome: Outcome | None = None) -> tuple[LatencyMetric, ...]:
    """The declared latencies, in order; only those `slo` / `series` cover, or recorded for `outcome`, when given."""
    return tuple(
        m
        for m in LATENCIES
        if (not slo or m.slo) and (not series or m.series) and (outcome is None or outcome in m.outcomes)
    )


def names(metrics: Sequence[LatencyMetric] | None = None) -> tuple[str, ...]:
    """The names of `metrics` (default: every declared latency)."""
    return tuple(m.name for m in (LATENCIES if metrics is None else metrics))


def pick(*wanted: str) -> tuple[LatencyMetric, ...]:
    """The declared latencies named `wanted`, in that order (a chart's chosen few); KeyError naming an unknown one."""
    by_name = {m.name: m for m in LATENCIES}
    missing = [name for name in wanted if name not in by_name]
    if missing:
        raise KeyError(f"no latency declared as {', '.join(missing)} (metrics/declarations.py)")
    return tuple(by_name[name] for name in wanted)


def label(name: str) -> str:
    """The label of the declared latency `name`."""
    return pick(name)[0].label
