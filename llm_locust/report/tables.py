"""Derived tables: one row per step of each run (a run without steps is one row), and the load axis.

Units follow the summary: latencies in ms (`ttft_ms_p90`), rates per second.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from llm_locust.apis import OUTPUTS, summary_counting, summary_rates
from llm_locust.metrics.client_error import client_error_text, limited_reason
from llm_locust.metrics.declarations import latencies, names
from llm_locust.metrics.intervals import half_width
from llm_locust.metrics.vocabulary import PERCENTILES, ci_key, latency_key, pct_key
from llm_locust.report.html import fmt
from llm_locust.report.run_data import RunData

STATS = ("mean", *(pct_key(p) for p in PERCENTILES), "max")
THROUGHPUT_KEYS = ("requests_ok", "requests_failed", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s")
RATE_MODELS = ("rate", "rate_sweep", "rate_search")


def row_latencies() -> tuple[str, ...]:
    """The latencies of the step rows: each one --slo may name (`slo`), the tables show (`table_stats`) or the
    latency-vs-load charts draw (`series`)."""
    return names([m for m in latencies() if m.slo or m.table_stats or m.series])


def latency_table_columns() -> dict[str, str]:
    """The latency columns of the steps and comparison tables with their headers, from each declaration's
    `table_stats`: `ttft_ms_p90` -> "TTFT p90 ms"."""
    return {latency_key(m.name, stat): f"{m.label} {stat} ms" for m in latencies() for stat in m.table_stats}


def load_axis(run: RunData) -> tuple[str, str]:
    """The column that measures the load of `run`'s steps and its axis title.

    `rate_per_s` (offered request rate) for open-loop runs, else `users` (concurrency).
    """
    model = ((run.summary or {}).get("load") or {}).get("model")
    if model in RATE_MODELS:
        return "rate_per_s", "Offered rate (requests/s)"
    return "users", "Concurrency (users)"


def step_sources(run: RunData) -> list[tuple[int | None, str, dict[str, Any]]]:
    """(index, label, step object) per step of `run` (a capacity search's trials by rate); a run without steps is one
    pseudo-step (index None, label "run": the summary itself, with `users` = users_max); [] without summary."""
    summary = run.summary
    if summary is None:
        return []
    if run.steps:
        sources = [(step.get("index", i), step.get("label") or f"step {i}", step) for i, step in enumerate(run.steps)]
        if (summary.get("load") or {}).get("model") == "rate_search":  # trials ran in search order: by rate here
            sources.sort(key=lambda source: source[2].get("rate_per_s") or 0.0)
        return sources
    load = summary.get("load") or {}
    whole = {**summary, "users": summary["run"].get("users_max"), "rate_per_s": load.get("rate_per_s")}
    return [(None, "run", whole)]


NEVER_STEADY = " (never steady)"
"""Added to the label of a step whose windows never passed the steady-state test (its figures are from its warm-up
floor on: docs/load-models.md "Steady state, precision and over-saturation")."""


def step_rows(run: RunData) -> pd.DataFrame:
    """One row per step of `run` (one row, step None, for a run without steps; empty without summary).

    Columns: run, step, label (`NEVER_STEADY` added to a step never steady), ended (why the step ended: duration,
    precision, oversaturated, stopped; None in older summaries), users, rate_per_s (offered; None for closed loop),
    achieved_rate_per_s, the throughput keys (a run whose API counts inputs, embeddings: its rates, inputs_per_s and
    input_tokens_per_s, instead of output_tokens_per_s; and the media rates the run moved, `apis.summary_rates`:
    audio seconds in and out per second, the real-time factor), failures (total count), `{metric}_ms_{stat}`
    for every latency metric and statistic, output_tokens_mean, goodput_requests_per_s /
    slo_attainment when the summary has them, the accuracy cells (`accuracy_cells`) and the energy and cost cells
    (`efficiency_cells`).
    """
    rows = []
    slos_set = ((run.summary or {}).get("settings") or {}).get("slo")
    counting = summary_counting(run.summary or {})
    rates = summary_rates(run.summary or {})  # its counting's, and the media's it moved (audio s/s, RTF)
    for index, label, source in step_sources(run):
        throughput = source["throughput"]
        ended = source.get("ended") or {}
        row: dict[str, Any] = {
            "run": run.name,
            "step": index,
            "label": label + NEVER_STEADY if (source.get("steady_state") or {}).get("reached") is False else label,
            "ended": ended.get("reason"),
            "users": source.get("users"),
            "rate_per_s": source.get("rate_per_s"),
            "achieved_rate_per_s": _first(
                source.get("achieved_rate_per_s"),
                throughput.get("achieved_rate_per_s"),
                throughput.get("requests_per_s"),
            ),
            **{key: throughput.get(key) for key in THROUGHPUT_KEYS},
            "failures": sum((source.get("failures") or {}).values()),
        }
        if counting is not OUTPUTS:  # its own rates (embeddings: inputs and their tokens), output tok/s only if one
            row["output_tokens_per_s"] = None
        row.update({rate.key: throughput.get(rate.key) for rate in rates})
        metrics = source["metrics"]
        for metric in row_latencies():
            stats = metrics.get(f"{metric}_ms") or {}
            for stat in STATS:
                row[f"{metric}_ms_{stat}"] = stats.get(stat)
            for p in PERCENTILES:
                row[latency_key(metric, ci_key(p))] = stats.get(ci_key(p))
        row["output_tokens_mean"] = (metrics.get("output_tokens") or {}).get("mean")
        row.update(_goodput(source, bool(slos_set)))
        row.update(accuracy_cells(source))
        row.update(efficiency_cells(source))
        rows.append(row)
    return pd.DataFrame(rows)


def interval_cell(value: Any, interval: Any) -> Any:
    """A percentile's table cell with its 95 % interval (summary.json's `[low, high]`, docs/metrics.md "Intervals"):
    `value ± h` (`intervals.half_width`: the symmetric range that holds the interval), `value ± ?` when an end is open
    (too few requests to bound it); `value` alone without an interval (older runs)."""
    if value is None or not isinstance(interval, (list, tuple)) or pd.isna(value):
        return value
    h = half_width(float(value), interval)
    return f"{fmt(float(value))} ± {'?' if h is None else fmt(h)}"


def cells_with_intervals(frame: pd.DataFrame, columns: list[str]) -> list[list[Any]]:
    """`frame`'s `columns` as table rows (NaN as None), each percentile's cell with its interval (`interval_cell`) where
    `frame` has one beside it (`<column>_ci95`)."""
    body = frame[columns].astype(object).where(frame[columns].notna(), None).to_numpy().tolist()
    for i, column in enumerate(columns):
        if f"{column}_ci95" in frame.columns:
            for row, interval in zip(body, frame[f"{column}_ci95"], strict=True):
                row[i] = interval_cell(row[i], interval)
    return body


def _first(*values: Any) -> Any:
    """The first value that is not None (older summaries lack the newer keys)."""
    return next((value for value in values if value is not None), None)


def _goodput(source: dict[str, Any], slos_set: bool) -> dict[str, float | None]:
    """Goodput (requests/s meeting every SLO the run was given) and SLO attainment (0..1); None
    when the run had no SLOs (every request would count as good)."""
    throughput = source.get("throughput") or {}
    if not slos_set:
        return {"goodput_requests_per_s": None, "slo_attainment": None}
    return {"goodput_requests_per_s": throughput.get("goodput_per_s"), "slo_attainment": throughput["slo_attainment"]}


ACCURACY_COLUMNS = {
    "accuracy": "accuracy",
    "accuracy_ci95_low": "accuracy CI low",
    "accuracy_ci95_high": "accuracy CI high",
    "answers_scored": "answers scored",
}
"""The accuracy cells of a step row (`accuracy_cells`): header."""


def accuracy_cells(source: dict[str, Any]) -> dict[str, float | int | None]:
    """A step's (or a run's) accuracy of its scored answers (0..1), its Wilson 95 % interval and the answers
    scored (summary.json `accuracy`); None where no answer was scored or the summary predates scoring."""
    accuracy = source.get("accuracy") or {}
    return {"accuracy": accuracy.get("accuracy"), "accuracy_ci95_low": accuracy.get("ci95_low"),
            "accuracy_ci95_high": accuracy.get("ci95_high"), "answers_scored": accuracy.get("scored")}  # fmt: skip


EFFICIENCY_COLUMNS = {
    ("energy", "joules_per_output_token"): "J/output token",
    ("energy", "joules_per_request"): "J/request",
    ("energy", "mean_power_w"): "mean GPU power W",
    ("cost", "usd_per_million_output_tokens"): "$/M output tokens",
    ("cost", "usd_per_million_input_tokens"): "$/M input tokens",
}
"""The energy and cost cells of a step row and the run facts (`(summary key, its key)`: header)."""


def efficiency_cells(source: dict[str, Any]) -> dict[str, float | None]:
    """A step's (or a run's) energy and cost, keyed by the name inside summary.json's `energy` / `cost`; None
    where the run did not measure them (no DCGM power, no --cost-per-hour) or the summary predates them."""
    return {key: (source.get(part) or {}).get(key) for part, key in EFFICIENCY_COLUMNS}


def all_step_rows(runs: list[RunData]) -> pd.DataFrame:
    """`step_rows` of every run, one frame."""
    frames = [frame for frame in (step_rows(run) for run in runs) if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_facts(run: RunData) -> dict[str, Any]:
    """Run metadata for the header table: target, model, workload, load model, versions, duration, workers."""
    summary = run.summary or {}
    meta = summary.get("run") or {}
    settings = summary.get("settings") or {}
    load = summary.get("load") or {}
    workload = ", ".join(
        f"{key}={settings[key]}"
        for key in ("prompt_tokens", "max_tokens", "ignore_eos", "prefix_tokens", "dataset", "image")
        if settings.get(key) not in (None, "", 0, [])
    )
    arrival = ", ".join(f"{key} {load[key]}" for key in ("rate_per_s", "arrival", "burstiness") if load.get(key))
    model = load.get("model") or ("concurrency" if summary else None)
    tokens = summary.get("tokens") or {}
    checked = tokens.get("output_tokens_checked")
    efficiency = efficiency_cells(summary)
    paused = summary.get("backoff") or {}  # users' pauses after failures without an answer
    facts: dict[str, Any] = {
        "folder": str(run.path),
        "target": meta.get("host"),
        "model": settings.get("model") or None,
        "workload": workload or None,
        "load model": f"{model} ({arrival})" if model and arrival else model,
        "server": " / ".join(filter(None, [settings.get("provider"), settings.get("server_family")])) or None,
        "client": settings.get("client"),
        "steps": len(run.steps) or None,
        "start": meta.get("start_time"),
        "duration s": meta.get("duration_s"),
        "users max": meta.get("users_max"),
        "workers": "none (local runner)" if meta.get("role") == "local" else meta.get("workers_max"),
        "send error by worker": send_error_by_worker(meta.get("queue_delay_ms_by_worker") or {}),
        "client error (p50 / p99)": client_error_text(summary["client_error"]) if summary.get("client_error") else None,
        "status": summary.get("status"),
        "stopped by": meta.get("stop_reason"),
        "backed off": f"{paused['pauses']} pauses, {paused['paused_s']} s" if paused.get("pauses") else None,
        "versions": _versions(summary),
        "SLOs (run)": ", ".join(settings.get("slo") or []) or None,
        **{header: efficiency[key] for (_, key), header in EFFICIENCY_COLUMNS.items()},
        "tokens per event": tokens.get("tokens_per_event"),
        "output tokens, --tokenizer vs usage": f"{tokens.get('output_token_mismatches')} of {checked} requests differ"
        if checked
        else None,
    }
    if run.summary is None and run.locust_history is not None:
        facts["users max"] = int(run.locust_history["User Count"].max())
        span = run.locust_history["Timestamp"]
        facts["duration s"] = float(span.max() - span.min())
    return {key: value for key, value in facts.items() if value is not None}


def send_error_by_worker(by_worker: dict[str, dict[str, Any]], listed: int = 4) -> str | None:
    """An open loop's send error (queue delay) of each process, `run.queue_delay_ms_by_worker`, in one line: p50 and
    p99 of each of up to `listed` processes, else of the one with the highest p99 and how many there were; None in a
    closed loop."""
    if not by_worker:
        return None

    def cell(name: str) -> str:
        stats = by_worker[name]
        return f"{name}: p50 {stats.get('p50')} ms, p99 {stats.get('p99')} ms"

    if len(by_worker) <= listed:
        return "; ".join(cell(name) for name in sorted(by_worker))
    worst = max(by_worker, key=lambda name: by_worker[name].get("p99") or 0.0)
    return f"highest p99 of {len(by_worker)} processes: {cell(worst)}"


def _versions(summary: dict[str, Any]) -> str | None:
    """ "llm-locust X, locust Y" from the summary, or None."""
    names = (("llm_locust_version", "llm-locust"), ("locust_version", "locust"))
    parts = [f"{name} {summary[key]}" for key, name in names if summary.get(key)]
    return ", ".join(parts) or None


def warnings_of(run: RunData) -> list[str]:
    """Banner lines for `run`: the summary's warnings, lost workers, an incomplete run, a client_limited one."""
    summary = run.summary or {}
    warnings = list(summary.get("warnings") or [])
    lost = (summary.get("run") or {}).get("workers_lost") or []
    if lost and not any("worker" in w for w in warnings):
        warnings.append(f"{len(lost)} worker(s) lost during the run: {', '.join(lost)}")
    if summary.get("status") == "incomplete":
        warnings.append("the run did not complete: the last step may be partial")
    client = limited_reason(summary.get("client_error") or {})
    if client:
        warnings.append(client)
    return warnings


def comparison_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Side by side, one column per run: its best-throughput step's numbers (rows: metrics; energy and cost when a
    run measured them)."""
    if rows.empty:
        return pd.DataFrame()
    best = rows.loc[rows.groupby("run", sort=False)["output_tokens_per_s"].idxmax()]
    columns = {
        "label": "step",
        "users": "users",
        "rate_per_s": "offered rate req/s",
        "output_tokens_per_s": "output tok/s",
        "requests_per_s": "requests/s",
        **latency_table_columns(),
        "failures": "failed requests",
        **{key: header for key, header in ACCURACY_COLUMNS.items() if best[key].notna().any()},
        **{key: header for (_, key), header in EFFICIENCY_COLUMNS.items() if best[key].notna().any()},
    }
    shown = pd.DataFrame(cells_with_intervals(best, list(columns)), columns=list(columns), index=best["run"])
    table = shown.rename(columns=columns).T
    table.columns.name = None
    return table
