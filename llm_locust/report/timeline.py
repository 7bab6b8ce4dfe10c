"""Figures over time: the LLM time series (llm_timeseries.csv), Locust's history
(`*_stats_history.csv`) and failures by kind; step boundaries and warm-ups marked.

Time is seconds since the run started (minutes or hours for long runs). Long histories are
binned to at most `MAX_POINTS` points per trace: rates become the mean of the bin, users and
latency percentiles the highest value in the bin (a spike stays visible).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.metrics.declarations import pick
from llm_locust.report.figure import Chart, finish, run_color, with_alpha
from llm_locust.report.run_data import RunData
from llm_locust.results.files import FAILURE_COLUMNS

MAX_POINTS = 2000
_PERCENTILE_DASH = {"p50": None, "p90": "dash", "p99": "dot"}
TIMELINE_LATENCIES = ("ttft", "tpot", "itl")
"""The latencies of the LLM timeline, by declared name (one panel each)."""


@dataclass(frozen=True)
class TimelineStep:
    """Where one step lies on the run's clock, seconds since the run started."""

    label: str
    start_s: float
    measure_start_s: float
    end_s: float


def time_unit(span_s: float) -> tuple[float, str]:
    """(seconds per unit, axis title) for a run lasting `span_s` seconds."""
    if span_s > 3 * 3600:
        return 3600.0, "time since start (h)"
    if span_s > 20 * 60:
        return 60.0, "time since start (min)"
    return 1.0, "time since start (s)"


def start_epoch_s(run: RunData) -> float | None:
    """Epoch seconds when `run` started: summary's start_time, else the first time-series or history row."""
    start = ((run.summary or {}).get("run") or {}).get("start_time")
    if start:
        try:
            return datetime.fromisoformat(start).timestamp()
        except ValueError:
            pass
    if run.timeseries is not None and not run.timeseries.empty:
        first = run.timeseries.iloc[0]
        return float(first["window_start_epoch_s"] - first["elapsed_s"])
    if run.locust_history is not None and not run.locust_history.empty:
        return float(run.locust_history["Timestamp"].min())
    return None


def step_spans(run: RunData) -> list[TimelineStep]:
    """The steps of `run` on its clock, from the summary's step times (or the time series' step column)."""
    t0 = start_epoch_s(run)
    spans = []
    for i, step in enumerate(run.steps):
        label = step.get("label") or f"step {i}"
        try:
            start = datetime.fromisoformat(step["start_time"]).timestamp() - (t0 or 0.0)
            end = datetime.fromisoformat(step["end_time"]).timestamp() - (t0 or 0.0)
        except (KeyError, TypeError, ValueError):
            start, end = _span_from_column(run, step.get("index", i))
            if start is None:
                continue
        spans.append(TimelineStep(label, start, start + float(step.get("warmup_s") or 0.0), end))
    return spans


def _span_from_column(run: RunData, index: int) -> tuple[float | None, float]:
    """First and last elapsed_s of the time-series rows of step `index` (None when absent)."""
    frame = run.timeseries
    if frame is None or "step" not in frame.columns:
        return None, 0.0
    rows = frame.loc[frame["step"] == index, "elapsed_s"]
    return (None, 0.0) if rows.empty else (float(rows.min()), float(rows.max()))


def downsample(frame: pd.DataFrame, x: str, peak_columns: list[str], mean_columns: list[str]) -> pd.DataFrame:
    """`frame` binned to at most MAX_POINTS rows: `x` and `mean_columns` averaged, `peak_columns` maxed."""
    if len(frame) <= MAX_POINTS:
        return frame
    width = int(np.ceil(len(frame) / MAX_POINTS))
    groups = frame.groupby(np.arange(len(frame)) // width)
    binned = groups[[x, *mean_columns]].mean()
    if peak_columns:
        binned[peak_columns] = groups[peak_columns].max()
    return binned.reset_index(drop=True)


def _mark_steps(figure: go.Figure, runs: list[RunData], unit_s: float) -> None:
    """Dotted line at each step start and shaded warm-up, spanning every subplot (set in one layout
    update: plotly re-validates every shape on each `add_shape`)."""
    shapes: list[dict] = []
    labels: list[dict] = []
    for i, run in enumerate(runs):
        color = run_color(i)
        for span in step_spans(run):
            start, measure = span.start_s / unit_s, span.measure_start_s / unit_s
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": start, "x1": start, "y0": 0, "y1": 1,
                           "line": {"color": color, "dash": "dot", "width": 1}})  # fmt: skip
            if measure > start:
                shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": measure, "y0": 0,
                               "y1": 1, "fillcolor": with_alpha(color, 0.07), "line": {"width": 0},
                               "layer": "below"})  # fmt: skip
            labels.append({"x": start, "y": 1.0, "xref": "x", "yref": "paper", "text": span.label, "showarrow": False,
                           "xanchor": "left", "yanchor": "bottom", "font": {"size": 10, "color": color},
                           "textangle": -30})  # fmt: skip
    if shapes:
        figure.update_layout(shapes=shapes, annotations=[*figure.layout.annotations, *labels])


def llm_timeline(runs: list[RunData]) -> Chart | None:
    """Users, req/s, output tok/s, TTFT/TPOT/ITL percentiles and failures per interval, over time."""
    series = [(i, run) for i, run in enumerate(runs) if run.timeseries is not None and not run.timeseries.empty]
    if not series:
        return None
    span_s = max(float(run.timeseries["elapsed_s"].max()) for _, run in series)
    unit_s, axis_title = time_unit(span_s)
    shown = pick(*TIMELINE_LATENCIES)
    panels = ["users", "output tokens/s", "requests/s", *(f"{m.label} (ms)" for m in shown), "failed requests/s"]
    figure = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=panels, vertical_spacing=0.035)
    for i, run in series:
        color, name = run_color(i), run.name
        interval_s = float(((run.summary or {}).get("timeseries") or {}).get("interval_s") or 1.0)
        kinds = [c for c in FAILURE_COLUMNS if c in run.timeseries and run.timeseries[c].sum() > 0]
        failed = {f"{c}_per_s": run.timeseries[c] / interval_s for c in kinds}  # by kind, when recorded
        frame = run.timeseries.assign(failed_per_s=run.timeseries["requests_failed"] / interval_s, **failed)
        latency = [f"{m.name}_ms_{p}" for m in shown for p in _PERCENTILE_DASH]
        rates = ["requests_per_s", "output_tokens_per_s", "failed_per_s", *failed]
        frame = downsample(frame, "elapsed_s", ["users", *latency], rates)
        x = frame["elapsed_s"].to_numpy(dtype=float) / unit_s
        lines = [
            (1, "users", "users", None),
            (2, "output_tokens_per_s", "output tok/s", None),
            (3, "requests_per_s", "req/s", None),
            *((4 + n, f"{m.name}_ms_{p}", f"{m.label} {p}", dash)
              for n, m in enumerate(shown) for p, dash in _PERCENTILE_DASH.items()),
            (len(panels), "failed_per_s", "failed/s", None),
            *((len(panels), f"{c}_per_s", f"failed/s {c.removeprefix('failed_')}", "dot") for c in kinds),
        ]  # fmt: skip
        for row, column, label, dash in lines:
            figure.add_trace(
                go.Scatter(
                    x=x, y=frame[column].to_numpy(dtype=float), mode="lines",
                    name=name if row == 1 else f"{name} {label}", legendgroup=name, showlegend=row == 1,
                    line={"color": color, "dash": dash, "width": 1.2}, meta={"run": name, "column": column},
                    hovertemplate="%{x:.4g}: %{y:.4g} " + label + "<extra>" + name + "</extra>",
                ),
                row=row, col=1,
            )  # fmt: skip
    _mark_steps(figure, [run for _, run in series], unit_s)
    figure.update_xaxes(title_text=axis_title, row=len(panels), col=1)
    binned = any(len(run.timeseries) > MAX_POINTS for _, run in series)
    return Chart(
        "llm_timeline",
        "LLM metrics over time",
        "From llm_timeseries.csv, one point per interval: latency percentiles p50 (solid), p90 (dashed), "
        "p99 (dotted) of the requests that finished in it. Dotted vertical lines: step starts; shaded: warm-up."
        + (f" Long run: binned to {MAX_POINTS} points (rates averaged, users and latencies the bin's highest)."
           if binned else ""),
        finish(figure, 1500, "LLM metrics over time"),
    )  # fmt: skip


def locust_timeline(runs: list[RunData]) -> Chart | None:
    """Locust's own history: users, requests/s, failures/s and response time p50/p95 per endpoint."""
    series = [(i, run) for i, run in enumerate(runs) if run.locust_history is not None]
    if not series:
        return None
    spans = [float(run.locust_history["Timestamp"].max() - (start_epoch_s(run) or 0.0)) for _, run in series]
    unit_s, axis_title = time_unit(max(spans))
    panels = ["users", "requests/s", "failures/s", "response time p50 / p95 (ms, Locust's rounded buckets)"]
    figure = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=panels, vertical_spacing=0.06)
    for i, run in series:
        history = run.locust_history
        t0 = start_epoch_s(run) or 0.0
        aggregated = history[history["Name"] == "Aggregated"]
        endpoints = history[(history["Name"] != "Aggregated") & (history["Type"] != "LLM")]
        groups = list(endpoints.groupby(["Type", "Name"], sort=True)) or [(("", "Aggregated"), aggregated)]
        users = downsample(aggregated, "Timestamp", ["User Count"], [])
        figure.add_trace(
            go.Scatter(
                x=(users["Timestamp"].to_numpy(dtype=float) - t0) / unit_s, y=users["User Count"].to_numpy(dtype=float),
                mode="lines", name=run.name, legendgroup=run.name, line={"color": run_color(i)},
                meta={"run": run.name, "column": "User Count"},
            ),
            row=1, col=1,
        )  # fmt: skip
        for n, ((kind, name), rows) in enumerate(groups):
            rows = downsample(rows, "Timestamp", ["50%", "95%"], ["Requests/s", "Failures/s"])
            x = (rows["Timestamp"].to_numpy(dtype=float) - t0) / unit_s
            label = f"{run.name} {kind} {name}".replace("  ", " ")
            dash = [None, "dash", "dot", "dashdot"][n % 4]
            for row, column in ((2, "Requests/s"), (3, "Failures/s"), (4, "50%"), (4, "95%")):
                figure.add_trace(
                    go.Scatter(
                        x=x, y=rows[column].to_numpy(dtype=float), mode="lines", name=f"{label} {column}",
                        legendgroup=run.name, showlegend=False,
                        line={"color": run_color(i), "dash": dash, "width": 1.8 if column != "95%" else 0.8},
                        meta={"run": run.name, "endpoint": f"{kind} {name}".strip(), "column": column},
                        hovertemplate="%{x:.4g}: %{y:.4g}<extra>" + f"{label} {column}" + "</extra>",
                    ),
                    row=row, col=1,
                )  # fmt: skip
    _mark_steps(figure, [run for _, run in series], unit_s)
    figure.update_xaxes(title_text=axis_title, row=len(panels), col=1)
    return Chart(
        "locust_timeline",
        "Locust's history",
        "From Locust's *_stats_history.csv (HTTP rows; LLM rows are in the chart above): its response "
        "times are rounded buckets, use the LLM charts for latency.",
        finish(figure, 900, "Locust's history"),
    )


def failures_chart(runs: list[RunData]) -> Chart | None:
    """Failed requests by kind, per step (llm-locust) or per error (plain Locust)."""
    figure = go.Figure()
    any_bar = False
    for run in runs:
        counts: dict[str, dict[str, int]] = {}  # kind -> x label -> count
        if run.summary is not None:
            sources = [(step.get("label") or f"step {n}", step) for n, step in enumerate(run.steps)] or [
                ("run", run.summary)
            ]
            for label, source in sources:
                for kind, count in (source.get("failures") or {}).items():
                    counts.setdefault(kind, {})[f"{run.name} · {label}"] = int(count)
        elif run.locust_failures is not None:
            for error, frame in run.locust_failures.groupby("Error"):
                counts[str(error)[:60]] = {run.name: int(frame["Occurrences"].sum())}
        for kind, by_label in sorted(counts.items()):
            any_bar = True
            figure.add_trace(
                go.Bar(
                    x=list(by_label), y=list(by_label.values()), name=kind, meta={"run": run.name, "kind": kind},
                    hovertemplate="%{x}<br>%{y} " + kind + "<extra></extra>",
                )
            )  # fmt: skip
    if not any_bar:
        return None
    figure.update_layout(barmode="stack")
    figure.update_yaxes(title_text="failed requests")
    return Chart(
        "failures",
        "Failures by kind",
        "Failed requests (excluded from every latency and throughput number) by kind, per step. "
        "Failures per interval over time are in the LLM time-series chart.",
        finish(figure, 380, "Failures by kind"),
    )
