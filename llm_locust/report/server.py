"""The server's perspective in the report (runs made with --metrics-url): its queue, batch and
KV-cache over time beside the client's TTFT and throughput, and a table setting the server's
numbers against the client's. Only for runs whose folder has server_metrics.csv.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.report.figure import Chart, finish, run_color
from llm_locust.report.html import Section, note, table
from llm_locust.report.run_data import RunData
from llm_locust.report.timeline import time_unit

_DASH = (None, "dash", "dot", "dashdot")


def server_timeline(runs: list[RunData]) -> Chart | None:
    """Waiting and running requests, KV-cache usage, server vs client TTFT and output tokens/s over
    time; None when no run has server metrics."""
    series = [(i, run) for i, run in enumerate(runs) if run.server_metrics is not None and not run.server_metrics.empty]
    if not series:
        return None
    span_s = max(float(run.server_metrics["elapsed_s"].max()) for _, run in series)
    unit_s, axis_title = time_unit(span_s)
    panels = [
        "requests waiting (queue) and running (batch)",
        "KV-cache usage (%)",
        "TTFT (ms): server mean (dashed) and p50 (dotted) vs client p50 (solid)",
        "output tokens/s: server vs client",
    ]
    figure = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=panels, vertical_spacing=0.06)

    def add(row: int, x: Any, y: Any, label: str, meta: dict[str, Any], color: str, dash: str | None) -> None:
        figure.add_trace(
            go.Scatter(
                x=x, y=y, mode="lines+markers", name=label, legendgroup=meta["run"], showlegend=True,
                line={"color": color, "dash": dash, "width": 1.4}, marker={"size": 3}, meta=meta,
                hovertemplate="%{x:.4g}: %{y:.4g}<extra>" + label + "</extra>",
            ),
            row=row, col=1,
        )  # fmt: skip

    for i, run in series:
        color = run_color(i)
        for n, (url, rows) in enumerate(run.server_metrics.groupby("url", sort=False)):
            x = rows["elapsed_s"].to_numpy(dtype=float) / unit_s
            tag = run.name if run.server_metrics["url"].nunique() == 1 else f"{run.name} {url}"
            lines = (
                (1, "waiting", "waiting", _DASH[n % 4]),
                (1, "running", "running", "dot"),
                (2, "kv_cache_usage", "KV-cache %", _DASH[n % 4]),
                (3, "ttft_mean_ms", "server TTFT mean", "dash"),
                (3, "ttft_p50_ms", "server TTFT p50", "dot"),
                (4, "generation_tokens_per_s", "server gen tok/s", "dash"),
            )
            for row, column, label, dash in lines:
                y = rows[column].to_numpy(dtype=float) * (100.0 if column == "kv_cache_usage" else 1.0)
                if (y == y).any():  # not all NaN: the server exports it
                    add(row, x, y, f"{tag} {label}", {"run": run.name, "url": url, "column": column}, color, dash)
        frame = run.timeseries
        if frame is not None and not frame.empty:
            x = frame["elapsed_s"].to_numpy(dtype=float) / unit_s
            for row, column, label in (
                (3, "ttft_ms_p50", "client TTFT p50"),
                (4, "output_tokens_per_s", "client tok/s"),
            ):
                if column in frame.columns:
                    meta = {"run": run.name, "url": None, "column": f"client_{column}"}
                    add(row, x, frame[column].to_numpy(dtype=float), f"{run.name} {label}", meta, color, None)
    figure.update_xaxes(title_text=axis_title, row=len(panels), col=1)
    return Chart(
        "server_timeline",
        "The server's perspective over time",
        "From server_metrics.csv (the server's Prometheus metrics, scraped every --metrics-interval-s) beside "
        "llm_timeseries.csv (the client): a queue that grows while the batch stays at its limit is the server "
        "saturating. Server TTFT and tokens/s are over the interval since the previous scrape; client ones per "
        "time-series interval (solid).",
        finish(figure, 1000, "The server's perspective over time"),
    )


def server_rows(run: RunData) -> list[dict[str, Any]]:
    """One row per metrics URL of `run`: the server's numbers over the run beside the client's
    (ms, tokens, tokens/s); `ttft_overhead_ms` = client TTFT mean - server TTFT mean (network and
    client); `queue_share_of_ttft` = server queue-time mean / server TTFT mean."""
    summary = run.summary or {}
    server = summary.get("server") or {}
    client_ttft = ((summary.get("metrics") or {}).get("ttft_ms") or {}).get("mean")
    client = summary.get("throughput") or {}
    cancelled = (summary.get("metrics") or {}).get("output_tokens_cancelled") or {}
    cancelled_tokens = round(cancelled["mean"] * cancelled["count"]) if cancelled.get("count") else 0
    rows = []
    for entry in server.get("urls") or []:
        ttft, queue = entry.get("ttft_mean_ms"), entry.get("queue_time_mean_ms")
        rows.append(
            {
                "url": entry.get("url"),
                "family": entry.get("family"),
                "scrapes_ok": entry.get("scrapes_ok"),
                "scrapes_failed": entry.get("scrapes_failed"),
                "server_generation_tokens": entry.get("generation_tokens"),
                "client_output_tokens": client.get("output_tokens"),
                "client_cancelled_tokens": cancelled_tokens,
                "server_generation_tokens_per_s": entry.get("generation_tokens_per_s"),
                "client_output_tokens_per_s": client.get("output_tokens_per_s"),
                "server_ttft_mean_ms": ttft,
                "client_ttft_mean_ms": client_ttft,
                "ttft_overhead_ms": client_ttft - ttft if client_ttft is not None and ttft is not None else None,
                "queue_share_of_ttft": queue / ttft if queue is not None and ttft else None,
                "running_max": entry.get("running_max"),
                "waiting_max": entry.get("waiting_max"),
                "kv_cache_usage_mean": entry.get("kv_cache_usage_mean"),
                "lora_running_adapters_max": entry.get("lora_running_adapters_max"),
                "lora_waiting_adapters_max": entry.get("lora_waiting_adapters_max"),
                "last_error": entry.get("last_error"),
            }
        )
    return rows


_HEADERS = {
    "url": "metrics URL", "family": "server", "scrapes_ok": "scrapes ok", "scrapes_failed": "failed",
    "server_generation_tokens": "server gen tokens", "client_output_tokens": "client output tokens",
    "client_cancelled_tokens": "client tokens of cancelled streams",
    "server_generation_tokens_per_s": "server gen tok/s", "client_output_tokens_per_s": "client tok/s",
    "server_ttft_mean_ms": "server TTFT mean ms", "client_ttft_mean_ms": "client TTFT mean ms",
    "ttft_overhead_ms": "client − server TTFT ms", "queue_share_of_ttft": "queue share of server TTFT",
    "running_max": "peak running", "waiting_max": "peak waiting", "kv_cache_usage_mean": "mean KV-cache use",
    "lora_running_adapters_max": "peak running adapters", "lora_waiting_adapters_max": "peak waiting adapters",
    "last_error": "last scrape error",
}  # fmt: skip
_OPTIONAL = ("lora_running_adapters_max", "lora_waiting_adapters_max")
"""Columns shown only when some server exports them (a server serving LoRA adapters)."""


def server_section(runs: list[RunData]) -> Section | None:
    """The "Server's perspective" table (runs with a summary "server" section only)."""
    rows = [(run.name, row) for run in runs for row in server_rows(run)]
    if not rows:
        return None
    shown = [key for key in _HEADERS if key not in _OPTIONAL or any(row[key] is not None for _, row in rows)]
    body = [[name, *(row[key] for key in shown)] for name, row in rows]
    return Section(
        "Server's perspective",
        [
            table(["run", *(_HEADERS[key] for key in shown)], body),
            note(
                "Server numbers from its Prometheus metrics between the first and last scrape of the run "
                "(requests still in flight at the end count on the server, not the client; so do the tokens a server "
                "decodes after a cancelled stream's client left). Client − server "
                "TTFT is the network and client overhead; the queue share is the part of the server's TTFT "
                "spent waiting for a batch slot. The LoRA columns (a server serving adapters) are the most adapters "
                "its running and its waiting requests used at once at a scrape."
            ),
        ],
    )
