"""GPU and host telemetry in the report (runs with a DCGM- or node-exporter --metrics-url): GPU
utilisation, memory and power and host CPU over time next to the client's output tokens/s, and a
table of the summary's telemetry. Only for runs whose folder has telemetry.csv.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.report.figure import Chart, finish, run_color
from llm_locust.report.html import Section, heading, note, table
from llm_locust.report.run_data import RunData
from llm_locust.report.timeline import time_unit
from llm_locust.scrape.hardware import ALL_DEVICES

PANELS = (
    ("GPU utilisation (%): all GPUs (solid), each GPU (dotted)", ("gpu_util_pct",)),
    ("GPU memory used (MiB, all GPUs)", ("fb_used_mib",)),
    ("GPU power (W, all GPUs)", ("power_w",)),
    ("host CPU busy and memory used (%)", ("cpu_busy_pct", "mem_used_pct")),
)
"""(title, metrics) of the telemetry panels; a panel is drawn when a run has one of its metrics."""
_BREAKDOWN = "gpu_util_pct"
"""The metric also drawn per device."""


def telemetry_timeline(runs: list[RunData]) -> Chart | None:
    """The telemetry panels over time plus the client's output tokens/s; None without telemetry."""
    series = [(i, run) for i, run in enumerate(runs) if run.telemetry is not None and not run.telemetry.empty]
    if not series:
        return None
    present = set().union(*(set(run.telemetry["metric"]) for _, run in series))
    panels = [(title, metrics) for title, metrics in PANELS if present.intersection(metrics)]
    if not panels:
        return None
    titles = [title for title, _ in panels] + ["client output tokens/s"]
    span_s = max(float(run.telemetry["elapsed_s"].max()) for _, run in series)
    unit_s, axis_title = time_unit(span_s)
    figure = make_subplots(rows=len(titles), cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.07)

    def add(row: int, x: Any, y: Any, label: str, meta: dict[str, Any], color: str, dash: str | None) -> None:
        figure.add_trace(
            go.Scatter(
                x=x, y=y, mode="lines+markers", name=label, legendgroup=meta["run"],
                line={"color": color, "dash": dash, "width": 1.4 if dash is None else 1.0}, marker={"size": 3},
                meta=meta, hovertemplate="%{x:.4g}: %{y:.4g}<extra>" + label + "</extra>",
            ),
            row=row, col=1,
        )  # fmt: skip

    for i, run in series:
        color = run_color(i)
        frame = run.telemetry
        several = frame["url"].nunique() > 1
        for url, rows in frame.groupby("url", sort=False):
            tag = f"{run.name} {url}" if several else run.name
            for row, (_, metrics) in enumerate(panels, start=1):
                for n, metric in enumerate(metrics):
                    picked = rows[rows["metric"] == metric]
                    for device, points in picked.groupby("device", sort=False):
                        if device != ALL_DEVICES and metric != _BREAKDOWN:
                            continue
                        label = f"{tag} {metric}" + ("" if device == ALL_DEVICES else f" gpu {device}")
                        dash = ("dash" if n else None) if device == ALL_DEVICES else "dot"
                        meta = {"run": run.name, "url": url, "metric": metric, "device": device}
                        x = points["elapsed_s"].to_numpy(dtype=float) / unit_s
                        add(row, x, points["value"].to_numpy(dtype=float), label, meta, color, dash)
        client = run.timeseries
        if client is not None and not client.empty and "output_tokens_per_s" in client.columns:
            meta = {"run": run.name, "url": None, "metric": "client_output_tokens_per_s", "device": None}
            x = client["elapsed_s"].to_numpy(dtype=float) / unit_s
            y = client["output_tokens_per_s"].to_numpy(dtype=float)
            add(len(titles), x, y, f"{run.name} client tok/s", meta, color, None)
    figure.update_xaxes(title_text=axis_title, row=len(titles), col=1)
    return Chart(
        "telemetry_timeline",
        "GPU and host telemetry over time",
        "From telemetry.csv (a DCGM-exporter's or node-exporter's metrics, scraped every --metrics-interval-s) "
        "beside llm_timeseries.csv (the client): utilisation and power that stay high while tokens/s stops "
        "growing mean the GPUs are the limit; a busy host CPU with idle GPUs points at the server's CPU side "
        "(or the load generator sharing the host).",
        finish(figure, 260 * len(titles) + 120, "GPU and host telemetry over time"),
    )


_COLUMNS = (
    ("gpu_util_pct", "mean", "GPU util mean %"), ("gpu_util_pct", "p50", "GPU util p50 %"),
    ("gpu_util_pct", "max", "GPU util max %"), ("fb_used_mib", "max", "GPU mem used max MiB"),
    ("fb_used_pct", "max", "GPU mem used max %"), ("power_w", "mean", "power mean W"),
    ("power_w", "max", "power max W"), ("temp_c", "max", "temp max °C"),
    ("cpu_busy_pct", "mean", "host CPU busy mean %"), ("cpu_busy_pct", "max", "host CPU busy max %"),
    ("mem_used_pct", "max", "host mem used max %"), ("load1", "max", "load1 max"),
    ("net_rx_bytes_per_s", "mean", "net rx mean B/s"), ("net_tx_bytes_per_s", "mean", "net tx mean B/s"),
)  # fmt: skip
"""(metric, statistic, header) of the telemetry table; a column is shown when any URL has it."""


def telemetry_section(runs: list[RunData]) -> Section | None:
    """The "GPU and host telemetry" tables from the summaries' "telemetry": one for the GPU
    exporters, one for the hosts, a row per URL and a column per statistic any of them has."""
    entries = [(run.name, entry) for run in runs for entry in _telemetry_urls(run)]
    if not entries:
        return None
    section = Section("GPU and host telemetry")
    for family, title in (("dcgm", "GPUs (DCGM-exporter)"), ("node", "hosts (node-exporter)")):
        group = [(name, entry) for name, entry in entries if entry.get("family") == family]
        if not group:
            continue
        shown = [c for c in _COLUMNS if any(c[0] in (entry.get(ALL_DEVICES) or {}) for _, entry in group)]
        headers = ["run", "metrics URL", "devices", "scrapes ok", "failed", *(h for _, _, h in shown)]
        body = []
        for name, entry in group:
            stats = entry.get(ALL_DEVICES) or {}
            line = [name, entry.get("url"), ", ".join(entry.get("devices") or []), entry.get("scrapes_ok"),
                    entry.get("scrapes_failed")]  # fmt: skip
            body.append(line + [(stats.get(metric) or {}).get(stat) for metric, stat, _ in shown])
        section.parts += [heading(title), table(headers, body)]
    section.parts.append(
        note(
            "From the telemetry exporters' metrics over the run (summary.json's telemetry): GPU values over all "
            "GPUs (utilisation mean, memory and power summed, temperature of the hottest); host CPU busy from "
            "node_cpu_seconds_total rates, network bytes/s without the loopback interface."
        )
    )
    return section


def _telemetry_urls(run: RunData) -> list[dict[str, Any]]:
    """The summary's telemetry entries of `run` ([] without)."""
    return list(((run.summary or {}).get("telemetry") or {}).get("urls") or [])
