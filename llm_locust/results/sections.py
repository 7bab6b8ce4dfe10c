"""summary.json's sections computed from a set of requests' metrics (`WindowMetrics`): the latency distributions with
their intervals, throughput, each sweep step, the breakdowns, token accounting and its warnings, prefix reuse,
connections, back-off, agent sessions, throttling. Pure: `summary.build_summary` assembles them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from llm_locust.load.arrivals import StepSpan
from llm_locust.metrics.declarations import names
from llm_locust.metrics.intervals import BatchValues, with_intervals
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.scoring import accuracy_stats
from llm_locust.metrics.vocabulary import (
    COUNT_METRICS,
    latency_key,
    per_s,
)
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.files import iso_time


def metric_distributions(window: WindowMetrics) -> dict[str, dict[str, Any]]:
    """Per-metric distributions: each declared latency in ms (`ttft_ms`, ...), output tokens per request."""
    stats = {latency_key(m): window.distribution(m, scale=1000.0) for m in names()}
    stats.update((m, window.distribution(m)) for m in COUNT_METRICS)
    return stats


def metric_stats(
    window: WindowMetrics, batches: Mapping[str, BatchValues] | None = None, intervals: bool = True
) -> dict[str, dict[str, Any]]:
    """`metric_distributions` with each percentile's 95 % interval beside it (`intervals.with_intervals`), widened by
    `batches` (the scope's window quantiles by metric key, `intervals.Batches.of`); none: order statistics alone.
    `intervals` False: the distributions alone (a snapshot taken while the test runs: the intervals are the final
    summary's; the snapshot's cost is a stall of the client's loop every few seconds)."""
    if not intervals:
        return metric_distributions(window)
    batches = batches or {}
    return {
        key: with_intervals(window.hist.get(_metric_of(key)), dist, 1.0 if key in COUNT_METRICS else 1000.0,
                            batches.get(key))
        for key, dist in metric_distributions(window).items()
    }  # fmt: skip


def _metric_of(key: str) -> str:
    """The metric name of a `metric_distributions` key: "ttft_ms" -> "ttft", "output_tokens" -> itself."""
    return key if key in COUNT_METRICS else key.removesuffix("_ms")


def throughput(window: WindowMetrics, duration_s: float) -> dict[str, float | int]:
    """Token and request rates of `window` over `duration_s` seconds; failures never count."""
    finished = window.requests_ok + window.requests_failed  # judged against the SLOs (cancelled: not)
    return {
        "duration_s": round(duration_s, 3),
        "requests_ok": window.requests_ok,
        "requests_failed": window.requests_failed,
        "requests_cancelled": window.requests_cancelled,
        "requests_good": window.requests_good,
        "output_tokens": window.output_tokens,
        "prompt_tokens": window.prompt_tokens,
        "requests_per_s": per_s(window.requests_ok, duration_s),
        "achieved_rate_per_s": per_s(window.requests_finished, duration_s),
        "goodput_per_s": per_s(window.requests_good, duration_s),
        "slo_attainment": round(window.requests_good / finished, 4) if finished else None,
        "output_tokens_per_s": per_s(window.output_tokens, duration_s),
        "total_tokens_per_s": per_s(window.output_tokens + window.prompt_tokens, duration_s),
        "inputs": window.inputs,
        "inputs_per_s": per_s(window.inputs, duration_s),
        "input_tokens_per_s": per_s(window.prompt_tokens, duration_s),
        "output_bytes": window.output_bytes,
        "output_bytes_per_input": window.output_bytes_per_input,
        "input_s": round(window.input_s, 6),
        "input_s_per_s": per_s(window.input_s, duration_s),
        "output_s": round(window.output_s, 6),
        "output_s_per_s": per_s(window.output_s, duration_s),
        "real_time_factor": window.real_time_factor,
    }


def step_summary(
    span: StepSpan,
    window: WindowMetrics | None,
    warmup_requests: int,
    steady_state: dict[str, Any],
    batches: Mapping[str, BatchValues] | None = None,
    intervals: bool = True,
) -> dict[str, Any]:
    """One sweep step (`intervals`: as `metric_stats`): its load, its measurement window and the metrics of the
    requests sent in it (from its steady start, `steady_state`: `metrics.step_windows.StepWindows.to_summary`, or its
    warm-up floor when it never was steady), and why it ended. Throughput divides by the measurement window: in a
    steady state as many requests are sent in it as finish in it."""
    window = window or WindowMetrics()
    step = span.step
    measured = throughput(window, span.measure_s)
    return {
        "index": step.index,
        "label": step.label,
        "users": step.users,
        "rate_per_s": step.rate_per_s,
        "prompt_tokens": step.prompt_tokens,
        "max_tokens": step.max_tokens,
        "start_time": iso_time(span.start_s),
        "end_time": iso_time(span.end_s or time.time()),
        "warmup_s": step.warmup_s,
        "measure_s": round(span.measure_s, 3),
        "warmup_requests": warmup_requests,
        "steady_state": steady_state,
        "ended": None if span.ended is None else {"reason": span.ended, "detail": span.ended_detail},
        "metrics": metric_stats(window, batches, intervals),
        "throughput": measured,
        "achieved_rate_per_s": measured["achieved_rate_per_s"],
        "failures": dict(window.failures),
        "accuracy": accuracy_stats(window),
    }


def breakdowns(
    run: RunMetrics, duration_s: float, spans: tuple[StepSpan, ...], intervals: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """summary.json's "breakdowns" (`intervals`: as `metric_stats`): per dimension, one entry per (step, label)
    group in step then natural label order ("8-15" before "16-31"); rates divide by the step's measurement window, or
    the run's outside sweeps."""
    measure_s = {span.step.index: span.measure_s for span in spans}
    document: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(run.groups, key=lambda k: (k.dimension, k.step, _natural(k.label))):
        window = run.groups[key]
        document.setdefault(key.dimension, []).append(
            {
                "label": key.label,
                "step": key.step if key.step >= 0 else None,
                "requests_ok": window.requests_ok,
                "requests_failed": window.requests_failed,
                "requests_cancelled": window.requests_cancelled,
                "metrics": metric_stats(window, intervals=intervals),
                "throughput": throughput(window, measure_s.get(key.step, duration_s)),
                "failures": dict(window.failures),
                "accuracy": accuracy_stats(window),
            }
        )
    return document


def _natural(label: str) -> tuple[tuple[int, float | str], ...]:
    """Sort key putting numbers in numeric order inside labels: "8-15" < "16-31" < "r10" > "r9"."""
    return tuple((0, float(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", label) if part)


MULTI_TOKEN_EVENTS = 1.1
"""Output tokens per token event above which ITL is said to be per event (coalesced chunks, speculative decoding)."""


def token_accounting(window: WindowMetrics) -> dict[str, Any]:
    """Where output-token counts came from, how server and client counts agree, tokens per event, reasoning tokens.

    `prompt_tokens_checked` counts successful requests whose prompt length the client knew
    (synthetic prompts, or --tokenizer) and the server reported; `prompt_token_mismatches` those
    where usage.prompt_tokens differed (chat templates and BOS tokens add a constant on real servers).
    `output_tokens_checked` counts successful requests whose streamed text the client counted (--tokenizer) and
    whose usage.completion_tokens the server sent; `output_token_mismatches` those that differ, their share
    (0..1), the mean difference (client - server) and mean and largest absolute differences, in tokens per
    mismatching request. `itl_per_event`: events carry more than `MULTI_TOKEN_EVENTS` tokens on average, so an ITL
    gap spans `tokens_per_event` tokens.
    """
    per_event = round(window.output_tokens / window.token_events, 4) if window.token_events else None
    checked, mismatches = window.output_checks, window.output_mismatches
    return {
        "sources": dict(window.token_sources),
        "token_events": window.token_events,
        "usage_event_mismatches": window.usage_event_mismatches,
        "tokens_per_event": per_event,
        "itl_per_event": per_event is not None and per_event > MULTI_TOKEN_EVENTS,
        "reasoning_tokens": window.reasoning_tokens,
        "prompt_tokens_checked": window.prompt_checks,
        "prompt_token_mismatches": window.prompt_mismatches,
        "prompt_tokens_max_abs_diff": window.prompt_max_abs_diff,
        "output_tokens_checked": checked,
        "output_token_mismatches": mismatches,
        "output_token_mismatch_share": round(mismatches / checked, 4) if checked else None,
        "output_tokens_mean_diff": round(window.output_diff_sum / mismatches, 3) if mismatches else None,
        "output_tokens_mean_abs_diff": round(window.output_abs_diff_sum / mismatches, 3) if mismatches else None,
        "output_tokens_max_abs_diff": window.output_max_abs_diff,
    }


def prefix_reuse(window: WindowMetrics) -> dict[str, Any]:
    """Shared 512-token prompt blocks sent and how many an earlier request had (`workload/prefix_blocks.py`):
    `expected_reuse` (0..1, None without blocks) is the share a prefix cache of unbounded capacity would hit."""
    blocks, seen = window.prefix_blocks, window.prefix_blocks_seen
    return {"blocks": blocks, "blocks_seen": seen, "expected_reuse": round(seen / blocks, 4) if blocks else None}


def connections(window: WindowMetrics) -> dict[str, int]:
    """The connections requests went on: `new` (opened for them: their connect and TLS handshake are in
    `metrics.connect_ms` / `tls_handshake_ms`), `reused` (kept alive), and `retried_stale` (requests sent again on a
    new connection because the kept-alive one was closed before any byte of the response)."""
    return {"new": window.connections_new, "reused": window.connections_reused, "retried_stale": window.retried_stale}


def backoff(window: WindowMetrics) -> dict[str, float | int]:
    """The pauses of closed-loop users after failures without an answer (`load.backoff`, `--backoff-max-s`):
    `pauses`, and `paused_s`, their seconds summed over users and workers (2 users paused for the whole of a 10 s run:
    20 s) — the time those users offered no load."""
    return {"pauses": window.backoff_pauses, "paused_s": round(window.backoff_s, 3)}


def agent_sessions(window: WindowMetrics) -> dict[str, int] | None:
    """Agent sessions (locustfiles/agent.py): `sessions` ended, `sessions_failed` (a step failed and ended it),
    `tool_calls` made by successful answers; None when the run had no agent session (the steps and tool calls per
    session, the session duration and its model and tool time are in `metrics`)."""
    if not window.agent_sessions:
        return None
    return {"sessions": window.agent_sessions, "sessions_failed": window.agent_sessions_failed,
            "tool_calls": window.tool_calls}  # fmt: skip


def token_warnings(tokens: dict[str, Any]) -> list[str]:
    """The lines a `token_accounting` result adds to the summary's warnings: ITL per event, and a local
    tokenizer's count that disagrees with the server's usage."""
    lines = []
    if tokens["itl_per_event"]:
        ratio = tokens["tokens_per_event"]
        lines.append(
            f"stream events carry {ratio:.2f} output tokens on average: ITL is per event (the gap between "
            f"token-bearing events, ~{ratio:.2f} tokens), not per token; TPOT is per token"
        )
    if tokens["output_token_mismatches"]:
        lines.append(
            f"the local tokenizer's count of the streamed text differs from the server's usage.completion_tokens on "
            f"{tokens['output_token_mismatches']} of {tokens['output_tokens_checked']} requests "
            f"({100 * tokens['output_token_mismatch_share']:.1f} %): by {tokens['output_tokens_mean_diff']:+.2f} "
            f"tokens on average (client - server), at most {tokens['output_tokens_max_abs_diff']}; output tokens "
            "come from the server's usage"
        )
    return lines


def throttling(window: WindowMetrics, duration_s: float) -> dict[str, float | int]:
    """HTTP 429 responses of `window`: count, share of all requests (0..1), rate per second."""
    throttled = window.failures.get("http_429", 0)
    requests = window.requests_ok + window.requests_failed
    return {
        "http_429": throttled,
        "share_of_requests": round(throttled / requests, 4) if requests else 0.0,
        "per_s": per_s(throttled, duration_s),
    }
