"""The results folder: summary.json, the LLM time series CSV, and the console summary table.

Does not import Locust (the report tooling reads these files in plain Python processes).
Files are written so that a killed run leaves valid files: summary.json atomically (temp file
+ rename), the time series one flushed row per interval.
"""

from __future__ import annotations

import csv
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from llm_locust.apis import summary_counting
from llm_locust.load.arrivals import StepSpan
from llm_locust.load.search import search_line
from llm_locust.metrics.client_error import client_error_line
from llm_locust.metrics.declarations import latencies, names
from llm_locust.metrics.intervals import BatchValues, half_width, with_intervals
from llm_locust.metrics.record import ErrorKind
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.scoring import accuracy_stats
from llm_locust.metrics.vocabulary import (
    COUNT_METRICS,
    HISTOGRAMS_FILE,
    SERIES_PERCENTILES,
    SUMMARY_FILE,
    TIMESERIES_FILE,
    latency_key,
    per_s,
)
from llm_locust.metrics.window import WindowMetrics

BASE_COLUMNS = (
    "time",
    "window_start_epoch_s",
    "elapsed_s",
    "step",
    "users",
    "requests_ok",
    "requests_failed",
    "requests_per_s",
    "output_tokens_per_s",
)
"""The first columns of llm_timeseries.csv; then each declared series latency's p50, p90, p99, then the two below."""
FAILURE_COLUMNS = tuple(f"failed_{kind}" for kind in ErrorKind)
"""Failed requests of the interval by kind (after the columns above: files of older runs lack them)."""
EMBEDDING_COLUMNS = ("inputs_per_s", "input_tokens_per_s")
"""Embeddings: inputs and their (usage) tokens per second of the interval (last: files of older runs lack them)."""


def latency_columns() -> tuple[str, ...]:
    """The time series' latency columns: `<name>_ms_p50` .. `_p99` of each latency declared with `series=True`."""
    return tuple(latency_key(m.name, p) for m in latencies(series=True) for p in SERIES_PERCENTILES)


def timeseries_columns() -> tuple[str, ...]:
    """Every column of llm_timeseries.csv, in order."""
    return (*BASE_COLUMNS, *latency_columns(), *FAILURE_COLUMNS, *EMBEDDING_COLUMNS)


def metric_distributions(window: WindowMetrics) -> dict[str, dict[str, Any]]:
    """Per-metric distributions: each declared latency in ms (`ttft_ms`, ...), output tokens per request."""
    stats = {latency_key(m): window.distribution(m, scale=1000.0) for m in names()}
    stats.update((m, window.distribution(m)) for m in COUNT_METRICS)
    return stats


def metric_stats(window: WindowMetrics, batches: Mapping[str, BatchValues] | None = None) -> dict[str, dict[str, Any]]:
    """`metric_distributions` with each percentile's 95 % interval beside it (`intervals.with_intervals`), widened by
    `batches` (the scope's window quantiles by metric key, `intervals.Batches.of`); none: order statistics alone."""
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
    }


def step_summary(
    span: StepSpan,
    window: WindowMetrics | None,
    warmup_requests: int,
    steady_state: dict[str, Any],
    batches: Mapping[str, BatchValues] | None = None,
) -> dict[str, Any]:
    """One sweep step: its load, its measurement window and the metrics of the requests sent in
    it (from its steady start, `steady_state`: `metrics.step_windows.StepWindows.to_summary`, or its warm-up floor
    when it never was steady), and why it ended. Throughput divides by the measurement window: in a steady state as
    many requests are sent in it as finish in it."""
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
        "metrics": metric_stats(window, batches),
        "throughput": measured,
        "achieved_rate_per_s": measured["achieved_rate_per_s"],
        "failures": dict(window.failures),
        "accuracy": accuracy_stats(window),
    }


def breakdowns(run: RunMetrics, duration_s: float, spans: tuple[StepSpan, ...]) -> dict[str, list[dict[str, Any]]]:
    """summary.json's "breakdowns": per dimension, one entry per (step, label) group in step then natural label
    order ("8-15" before "16-31"); rates divide by the step's measurement window, or the run's outside sweeps."""
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
                "metrics": metric_stats(window),
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


_FIXES = {
    "connect": "check --host (scheme, address, port) and that the server is running",
    "tls": "openssl s_client -connect HOST:PORT -showcerts shows the certificate the server presents",
    "http_401": "the API key was rejected: put a valid key in the variable named by --api-key-env "
    "(default OPENAI_API_KEY; the provider's, e.g. GEMINI_API_KEY, with --provider) or pass --api-key",
    "aws_credentials": "AWS refused the SigV4 signature (--provider bedrock): check AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or AWS_PROFILE), that the key is active and this host's clock",
    "aws_access": "the AWS identity may not call the model: allow it bedrock:InvokeModelWithResponseStream (and "
    "bedrock:CallWithBearerToken for an API key) on the model or inference profile",
    "http_404": "check --model (GET /v1/models lists the served names) and the path in --host",
    "tls_scheme": "give --host the scheme the server speaks",
    "http_4xx": "the server rejected the requests: check --model, --max-tokens and --extra-body",
    "redirect": "the server redirected every request, and llm-locust follows no redirect (it would send the key "
    "elsewhere): point --host at the final URL, the Location in the reason",
    "http_429": "the endpoint throttled every request: lower the load (-u, the rate) or raise its rate limit",
    "http_5xx": "the server failed every request: check its logs",
    "timeout": "raise --connect-timeout-s / --first-token-timeout-s / --read-timeout-s, or lower the load",
    "server_lost": "the server answered at first, then refused connections: it stopped or crashed during the run "
    "(check its logs)",
}
_FALLBACK_FIX = "check that --host is an OpenAI-compatible endpoint that streams (SSE)"
_GOOGLE_BAD_KEY = "API key not valid"
"""What Google answers (HTTP 400, INVALID_ARGUMENT) to a wrong API key."""
USER_ERROR_CAUSES = (
    "connect",
    "tls",
    "tls_scheme",
    "http_401",
    "aws_credentials",
    "aws_access",
    "http_404",
    "http_4xx",
    "redirect",
)
_AWS_REFUSALS = ("Check your AWS Secret Access Key", "The security token included in the request is",
                 "Signature expired", "Missing Authentication Token")  # fmt: skip
"""What AWS's 403 answers say when the signature or the credentials are wrong (InvalidSignatureException,
UnrecognizedClientException, ExpiredTokenException, MissingAuthenticationTokenException)."""
"""Causes of a run in which nothing succeeded that the user fixes in the command (exit code 2)."""


def diagnose(window: WindowMetrics, top_error: str | None) -> tuple[str, str] | None:
    """Why no request of `window` succeeded, when none did and some failed: (cause, one line).

    `top_error` is the most frequent failure message (from Locust's error statistics); it tells
    a 401/403 and a 404 apart from other client errors. Returns None when a request succeeded.
    """
    failed = window.requests_failed
    if window.requests_ok or not failed:
        return None
    kind = window.failures.most_common(1)[0][0]
    cause = kind
    text = top_error or ""
    if kind == "connect" and len(window.failures) > 1:  # other kinds were answers: the host was right
        cause = "server_lost"
    elif kind == "tls" and ("use http://" in text or "use https://" in text):
        cause = "tls_scheme"
    elif kind == "http_4xx" and "HTTP 403" in text and any(refusal in text for refusal in _AWS_REFUSALS):
        cause = "aws_credentials"
    elif kind == "http_4xx" and "HTTP 403" in text and "is not authorized to perform: bedrock:" in text:
        cause = "aws_access"
    elif kind == "http_4xx" and ("HTTP 401" in text or "HTTP 403" in text or _GOOGLE_BAD_KEY in text):
        cause = "http_401"
    elif kind == "http_4xx" and "HTTP 404" in text:
        cause = "http_404"
    kinds = ", ".join(f"{k} {v}" for k, v in window.failures.most_common())
    first = f"; most frequent: {text}" if text else ""
    line = f"no request succeeded ({failed} failed: {kinds}){first} — {_FIXES.get(cause, _FALLBACK_FIX)}"
    return cause, line


def write_summary(results_dir: Path, summary: dict[str, Any]) -> Path:
    """Write summary.json atomically; return its path."""
    return _write_json(results_dir / SUMMARY_FILE, summary, orjson.OPT_INDENT_2)


def write_histograms(results_dir: Path, run: RunMetrics) -> Path:
    """Write histograms.json atomically: every non-empty histogram of the run and of each step,
    as `HdrHistogram.encode()` text (µs for latencies, tokens for output_tokens); return its path."""

    def encoded(window: WindowMetrics) -> dict[str, str]:
        return {m: h.encode().decode() for m, h in window.hist.items() if h.get_total_count()}

    document = {"run": encoded(run.total), "steps": {str(i): encoded(w) for i, w in sorted(run.steps.items())}}
    return _write_json(results_dir / HISTOGRAMS_FILE, document, 0)


def _write_json(path: Path, document: dict[str, Any], option: int) -> Path:
    """Write `document` to `path` atomically (temp file + rename): whole or not at all — a write that fails (disk
    full, the folder removed: OSError) leaves `path` as it was and no temp file; return `path`."""
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_bytes(orjson.dumps(document, option=option | orjson.OPT_NON_STR_KEYS))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return path


class TimeseriesWriter:
    """Appends one CSV row per closed window to llm_timeseries.csv, flushed as it goes."""

    def __init__(self, results_dir: Path, interval_s: float, t_start_epoch_s: float) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        self.path = results_dir / TIMESERIES_FILE
        self.interval_s = interval_s
        self.t_start_epoch_s = t_start_epoch_s
        self._file = self.path.open("w", newline="")
        self._csv = csv.writer(self._file)
        self.columns = timeseries_columns()
        self._csv.writerow(self.columns)
        self._file.flush()
        self.rows = 0

    def row(self, start_epoch_s: int, window: WindowMetrics, users: int, step: int | None) -> dict[str, Any]:
        """The row of the window that starts at `start_epoch_s` (epoch seconds), in sweep step
        `step` (None outside sweeps), keyed by `timeseries_columns()`; rates per second of the
        interval, latencies in ms ("" when the window has none)."""
        row: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start_epoch_s)),
            "window_start_epoch_s": start_epoch_s,
            "elapsed_s": round(start_epoch_s - self.t_start_epoch_s, 3),
            "step": "" if step is None else step,
            "users": users,
            "requests_ok": window.requests_ok,
            "requests_failed": window.requests_failed,
            "requests_per_s": per_s(window.requests_ok, self.interval_s),
            "output_tokens_per_s": per_s(window.output_tokens, self.interval_s),
        }
        for metric in latencies(series=True):
            stats = window.distribution(metric.name, scale=1000.0)
            row.update({latency_key(metric.name, p): "" if stats[p] is None else stats[p] for p in SERIES_PERCENTILES})
        row.update({f"failed_{kind}": window.failures.get(kind, 0) for kind in ErrorKind})
        row.update(inputs_per_s=per_s(window.inputs, self.interval_s),
                   input_tokens_per_s=per_s(window.prompt_tokens, self.interval_s))  # fmt: skip
        return row

    def write(self, row: dict[str, Any]) -> None:
        """Write a closed window's `row` (`row(...)`) to the file, flushed."""
        self._csv.writerow(row[column] for column in self.columns)
        self._file.flush()
        self.rows += 1

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()


def summary_table(summary: dict[str, Any]) -> str:
    """A fixed-width console table of the summary's latencies, throughput and failures."""
    metrics = summary["metrics"]
    lines = [
        f"{'LLM metric':<14}{'count':>9}{'mean':>10}{'p50':>18}{'p90':>18}{'p99':>18}{'max':>10}",
    ]
    t = summary["throughput"]
    counting = summary_counting(summary)  # what the run's API counts: output tokens, or inputs (embeddings)
    rows = counting.latencies or [(m.name, m.label) for m in latencies(series=True)]
    for name, label in rows:
        s = metrics[latency_key(name)]
        cells = "".join(f"{_with_interval(s, k):>18}" for k in ("p50", "p90", "p99"))
        lines.append(f"{label + ' ms':<14}{s['count']:>9}{_fmt(s['mean']):>10}{cells}{_fmt(s['max']):>10}")
    rates = ", ".join(f"{t[rate.key]:.1f} {rate.unit}" for rate in counting.rates)
    cut = (summary.get("unfinished") or {}).get("requests")
    lines.append(
        f"Throughput: {rates}, {t['requests_per_s']:.2f} req/s "
        f"over {t['duration_s']:.1f} s ({t['requests_ok']} ok, {t['requests_failed']} failed"
        + (f", {t['requests_cancelled']} cancelled" if t.get("requests_cancelled") else "")
        + (f"; {cut} cut by the run's end, not counted)" if cut else ")")
    )
    lines += efficiency_lines(summary)
    accuracy = summary.get("accuracy")
    if accuracy:
        lines.append(accuracy_line(accuracy))
    failures = summary["failures"]
    lines.append("Failures: " + (", ".join(f"{k} {v}" for k, v in sorted(failures.items())) if failures else "none"))
    paused = summary.get("backoff") or {}
    if paused.get("pauses"):
        lines.append(
            f"Backed off: {paused['pauses']} pauses, {paused['paused_s']:.1f} s in total (users waiting after failures "
            "without an answer: --backoff-max-s)"
        )
    throttled = summary.get("throttling", {})
    if throttled.get("http_429"):
        lines.append(
            f"Throttled (HTTP 429): {throttled['http_429']} requests, "
            f"{100 * throttled['share_of_requests']:.1f} % of all, {throttled['per_s']:.2f}/s"
        )
    if summary.get("client_error"):
        lines.append(client_error_line(summary["client_error"]))
    if summary.get("status") == "incomplete":
        lines.append("INCOMPLETE: the run was interrupted or lost workers; the results hold what was measured")
    for warning in summary.get("warnings", []):
        lines.append(f"WARNING: {warning}")
    if summary.get("search"):
        lines.append(search_line(summary["search"]))
    verdict = summary.get("verdict")
    if verdict is not None:
        lines.append("Verdict: " + ("PASSED" if verdict["passed"] else "FAILED: " + "; ".join(verdict["reasons"])))
    return "\n".join(lines)


def accuracy_line(accuracy: dict[str, Any]) -> str:
    """The console line of summary.json's `accuracy` (`scoring.accuracy_stats`)."""
    return (
        f"Accuracy: {100 * accuracy['accuracy']:.1f} % of {accuracy['scored']} scored answers ({accuracy['correct']} "
        f"right; 95 % CI {100 * accuracy['ci95_low']:.1f}-{100 * accuracy['ci95_high']:.1f} %)"
    )


def efficiency_lines(summary: dict[str, Any]) -> list[str]:
    """The console lines of the summary's `energy` and `cost` (none for what the run did not measure)."""
    lines = []
    energy, cost = summary.get("energy"), summary.get("cost")
    if energy:
        lines.append(
            f"Energy (DCGM power): {_fmt(energy['joules_per_output_token'])} J/output token, "
            f"{_fmt(energy['joules_per_request'])} J/request, mean {_fmt(energy['mean_power_w'])} W"
        )
    if cost:
        lines.append(
            f"Cost at ${cost['usd_per_hour']:g}/h: ${_fmt(cost['usd_per_million_output_tokens'])} per million output "
            f"tokens, ${_fmt(cost['usd_per_million_input_tokens'])} per million input tokens"
        )
    return lines


def iso_time(epoch_s: float) -> str:
    """Epoch seconds as a local ISO-8601 time with its UTC offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch_s))


def _with_interval(stats: dict[str, Any], key: str) -> str:
    """Percentile `key` of `stats` for the table, with its 95 % interval as ± (`intervals.half_width`; `± ?`: an end is
    open) when the summary has one."""
    value, interval = stats[key], stats.get(f"{key}_ci95")
    if value is None or interval is None:
        return _fmt(value)
    h = half_width(value, interval)
    return f"{_fmt(value)} ±{'?' if h is None else _fmt(h)}"


def _fmt(value: float | None) -> str:
    """A statistic for the table: '-' when there is no data."""
    return "-" if value is None else f"{value:.2f}"
