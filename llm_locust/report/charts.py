"""Figures over the steps of each run: latency against throughput, metrics against load,
capacity under SLOs, memory bandwidth utilisation.

Each point is one step (one run without steps is one point). Every trace carries
`meta = {"run", "metric", "stat"}` so the figure JSON can be read back (tests do).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.metrics.declarations import latencies, names, pick
from llm_locust.report.capacity import Capacity, knee_index
from llm_locust.report.figure import Chart, finish, latency_title, run_color, with_alpha
from llm_locust.report.mbu import Hardware, achieved_bandwidth_gbs, mbu
from llm_locust.report.run_data import RunData
from llm_locust.report.tables import load_axis

CURVE_METRICS = names(pick("ttft", "tpot", "e2e"))
"""The latencies of the operating-point curve (`latency_vs_load` shows every latency of the time series)."""
KNEE_METRIC = "e2e_ms_p50"
"""The latency whose curve against output tokens/s gives a run's knee (`capacity.knee_index`)."""


def has_curve(rows: pd.DataFrame) -> bool:
    """Whether the step rows make a curve: two points or more (a sweep's steps, or several runs side by side)."""
    return len(rows) >= 2


def _load_title(runs: list[RunData]) -> str:
    """The load axis title shared by `runs` (mixed kinds get a generic title)."""
    titles = {load_axis(run)[1] for run in runs if run.summary is not None}
    return titles.pop() if len(titles) == 1 else "Load (users, or offered requests/s)"


def _band(
    figure: go.Figure,
    frame: pd.DataFrame,
    x: str,
    metric: str,
    run: str,
    color: str,
    cell: tuple[int, int],
    legend: bool,
) -> None:
    """p50 line, a band up to p90 and a dashed p99 line of `metric` against column `x`, in subplot `cell`."""
    common = {"legendgroup": run, "x": frame[x].to_numpy(dtype=float), "text": frame["label"].tolist()}
    for stat, style in (
        ("p50", {"mode": "lines+markers", "line": {"color": color}}),
        ("p90", {"mode": "lines+markers", "line": {"color": color, "width": 0.5}, "fill": "tonexty",
                 "fillcolor": with_alpha(color, 0.18), "marker": {"size": 4}}),
        ("p99", {"mode": "lines+markers", "line": {"color": color, "dash": "dash", "width": 1},
                 "marker": {"size": 6, "symbol": "diamond-open"}}),
    ):  # fmt: skip
        figure.add_trace(
            go.Scatter(
                y=frame[f"{metric}_ms_{stat}"].to_numpy(dtype=float), name=run if stat == "p50" else f"{run} {stat}",
                showlegend=legend and stat == "p50", meta={"run": run, "metric": f"{metric}_ms", "stat": stat},
                hovertemplate="%{text}<br>x %{x:.4g}<br>" + stat + " %{y:.4g} ms<extra>" + run + "</extra>",
                **common, **style,
            ),
            row=cell[0], col=cell[1],
        )  # fmt: skip


def throughput_latency(runs: list[RunData], rows: pd.DataFrame, capacities: list[Capacity]) -> Chart | None:
    """TTFT, TPOT and E2E latency against output tokens/s: the operating-point curve, with each run's knee (a star,
    `knee_index` of its E2E p50) and its capacity pick under the SLOs (an open circle) marked."""
    if not has_curve(rows):
        return None
    titles = [latency_title(m) + " (ms)" for m in CURVE_METRICS]
    figure = make_subplots(rows=1, cols=len(CURVE_METRICS), subplot_titles=titles, horizontal_spacing=0.07)
    picks = {cap.run: cap.best.step for cap in capacities if cap.best is not None}
    for i, run in enumerate(runs):
        frame = rows[rows["run"] == run.name]
        if frame.empty:
            continue
        knee = knee_index(frame["output_tokens_per_s"].tolist(), frame[KNEE_METRIC].tolist())
        marks = [] if knee is None else [("knee", frame.iloc[knee], "star", 16)]
        picked = frame[frame["step"] == picks[run.name]] if run.name in picks else frame.iloc[:0]
        marks += [("capacity", row, "circle-open", 22) for _, row in picked.iterrows()]
        for col, metric in enumerate(CURVE_METRICS, start=1):
            _band(figure, frame, "output_tokens_per_s", metric, run.name, run_color(i), (1, col), col == 1)
            for mark, row, symbol, size in marks:
                figure.add_trace(
                    go.Scatter(
                        x=[row["output_tokens_per_s"]], y=[row[f"{metric}_ms_p50"]], mode="markers+text",
                        text=[mark if col == 1 else ""], textposition="top left", showlegend=False,
                        marker={"symbol": symbol, "size": size, "color": run_color(i), "line": {"width": 2}},
                        meta={"run": run.name, "metric": f"{metric}_ms", mark: row["label"]},
                        hovertemplate=f"{mark}: {row['label']}<extra>{run.name}</extra>",
                    ),
                    row=1, col=col,
                )  # fmt: skip
        figure.update_xaxes(title_text="output tokens/s")
    return Chart(
        "throughput_latency",
        "Latency against throughput",
        "One point per step (label on hover): solid line p50, shaded band up to p90, dashed line p99. The star is "
        "the knee: the last step that still bought throughput before latency climbed with little gain (E2E p50). "
        "The open circle is the capacity under the SLOs (see Capacity). Pick the operating point at or before the "
        "knee.",
        finish(figure, 430, "Latency against output throughput"),
    )


def latency_vs_load(runs: list[RunData], rows: pd.DataFrame) -> Chart | None:
    """Each latency's p50/p90/p99 against the load (concurrency or offered rate)."""
    if not has_curve(rows):
        return None
    metrics = names(latencies(series=True))
    titles = [latency_title(m) + " (ms)" for m in metrics]
    grid_rows = (len(metrics) + 1) // 2
    figure = make_subplots(rows=grid_rows, cols=2, subplot_titles=titles, vertical_spacing=0.28 / grid_rows,
                           horizontal_spacing=0.07)  # fmt: skip
    for i, run in enumerate(runs):
        frame = rows[rows["run"] == run.name]
        if frame.empty:
            continue
        x_key = load_axis(run)[0]
        for n, metric in enumerate(metrics):
            _band(figure, frame, x_key, metric, run.name, run_color(i), (n // 2 + 1, n % 2 + 1), n == 0)
    figure.update_xaxes(title_text=_load_title(runs), row=grid_rows)
    return Chart(
        "latency_vs_load",
        "Latency against load",
        "p50 (solid), band to p90, p99 (dashed) of each step against its load.",
        finish(figure, 320 * grid_rows, "Latency against load"),
    )


QUALITY_LATENCY = "e2e"
"""The latency drawn beside the accuracy in the "quality under load" chart."""


def quality_vs_load(runs: list[RunData], rows: pd.DataFrame) -> Chart | None:
    """Quality under load: each step's accuracy of its scored answers (%, with its Wilson 95 % interval as error
    bars) against the load, beside its E2E latency p50/p90/p99 against the same load; None unless a curve has
    scored answers."""
    if not has_curve(rows) or "accuracy" not in rows or rows["accuracy"].isna().all():
        return None
    titles = ["accuracy (%), 95 % CI", latency_title(QUALITY_LATENCY) + " (ms)"]
    figure = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    for i, run in enumerate(runs):
        frame = rows[(rows["run"] == run.name) & rows["accuracy"].notna()]
        if frame.empty:
            continue
        color, x_key = run_color(i), load_axis(run)[0]
        accuracy = 100 * frame["accuracy"].to_numpy(dtype=float)
        figure.add_trace(
            go.Scatter(
                x=frame[x_key].to_numpy(dtype=float), y=accuracy, text=frame["label"].tolist(), mode="lines+markers",
                name=run.name, legendgroup=run.name, line={"color": color},
                error_y={"type": "data", "symmetric": False,
                         "array": 100 * frame["accuracy_ci95_high"].to_numpy(dtype=float) - accuracy,
                         "arrayminus": accuracy - 100 * frame["accuracy_ci95_low"].to_numpy(dtype=float)},
                customdata=frame["answers_scored"].to_numpy(dtype=float), meta={"run": run.name, "metric": "accuracy"},
                hovertemplate="%{text}<br>accuracy %{y:.1f} % of %{customdata:.0f} answers<extra>" + run.name
                + "</extra>",
            ),
            row=1, col=1,
        )  # fmt: skip
        _band(figure, rows[rows["run"] == run.name], x_key, QUALITY_LATENCY, run.name, color, (1, 2), False)
    figure.update_xaxes(title_text=_load_title(runs))
    figure.update_yaxes(range=[0, 102], row=1, col=1)
    return Chart(
        "quality_vs_load",
        "Quality under load",
        "Left: the share of scored answers that were right at each step (a dataset's references, a scenario's "
        "score=), with its 95 % interval (Wilson); right: E2E latency at the same steps (p50, band to p90, p99). "
        "A server that stays fast but gets answers wrong under load shows it here first.",
        finish(figure, 420, "Accuracy and latency against load"),
    )


def throughput_vs_load(runs: list[RunData], rows: pd.DataFrame) -> Chart | None:
    """Output tokens/s, and achieved against offered request rate (with goodput when recorded)."""
    if not has_curve(rows):
        return None
    figure = make_subplots(rows=1, cols=2, subplot_titles=["output tokens/s", "requests/s"], horizontal_spacing=0.08)
    for i, run in enumerate(runs):
        frame = rows[rows["run"] == run.name]
        if frame.empty:
            continue
        color, x_key = run_color(i), load_axis(run)[0]
        x = frame[x_key].to_numpy(dtype=float)
        series = [("output_tokens_per_s", 1, "output tok/s", None), ("achieved_rate_per_s", 2, "achieved req/s", None)]
        if frame["goodput_requests_per_s"].notna().any():
            series.append(("goodput_requests_per_s", 2, "goodput req/s", "dot"))
        for column, col, label, dash in series:
            first = column == "output_tokens_per_s"
            figure.add_trace(
                go.Scatter(
                    x=x, y=frame[column].to_numpy(dtype=float), text=frame["label"].tolist(), mode="lines+markers",
                    name=run.name if first else f"{run.name} {label}", legendgroup=run.name, showlegend=first,
                    line={"color": color, "dash": dash}, meta={"run": run.name, "metric": column},
                    hovertemplate="%{text}<br>" + label + " %{y:.4g}<extra>" + run.name + "</extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
        if x_key == "rate_per_s":
            figure.add_trace(
                go.Scatter(
                    x=x, y=x, mode="lines", name="offered = achieved", line={"color": "#999", "dash": "dash"},
                    showlegend=i == 0, meta={"run": run.name, "metric": "offered_rate_per_s"},
                ),
                row=1, col=2,
            )  # fmt: skip
    figure.update_xaxes(title_text=_load_title(runs))
    return Chart(
        "throughput_vs_load",
        "Throughput against load",
        "Output tokens/s and completed requests/s per step; for open-loop runs the dashed grey line is "
        "the offered rate: achieved below it means the endpoint (or the client) could not keep up. "
        "Goodput (requests/s meeting every SLO) is dotted when the run recorded it.",
        finish(figure, 420, "Throughput against load"),
    )


def capacity_chart(runs: list[RunData], capacities: list[Capacity]) -> Chart | None:
    """Each SLO's measured value per step against its threshold; the pick of each run circled."""
    capacities = [c for c in capacities if c.checks]
    if not capacities:
        return None
    slos = [result.slo for result in capacities[0].checks[0].results]
    figure = make_subplots(rows=1, cols=len(slos), subplot_titles=[str(s) for s in slos], horizontal_spacing=0.07)
    colors = {run.name: run_color(i) for i, run in enumerate(runs)}
    for cap in capacities:
        color = colors[cap.run]
        x = [check.load for check in cap.checks]
        for col, slo in enumerate(slos, start=1):
            values = [check.results[col - 1].value_ms for check in cap.checks]
            symbols = ["circle" if check.results[col - 1].ok else "x" for check in cap.checks]
            figure.add_trace(
                go.Scatter(
                    x=x, y=values, mode="lines+markers", name=cap.run, legendgroup=cap.run, showlegend=col == 1,
                    line={"color": color}, marker={"symbol": symbols, "size": 9},
                    text=[check.label for check in cap.checks], meta={"run": cap.run, "slo": slo.name},
                    hovertemplate="%{text}<br>%{y:.4g} ms<extra>" + cap.run + "</extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
            if cap.best is not None:
                figure.add_trace(
                    go.Scatter(
                        x=[cap.best.load], y=[cap.best.results[col - 1].value_ms], mode="markers", showlegend=False,
                        marker={"symbol": "circle-open", "size": 18, "color": color, "line": {"width": 2}},
                        name=f"{cap.run} capacity", meta={"run": cap.run, "slo": slo.name, "pick": cap.best.label},
                        hoverinfo="skip",
                    ),
                    row=1, col=col,
                )  # fmt: skip
            figure.add_hline(y=slo.max_ms, line={"color": "#d62728", "dash": "dash"}, row=1, col=col)
    figure.update_xaxes(title_text=_load_title(runs))
    return Chart(
        "capacity",
        "Capacity under the SLOs",
        "Each SLO's measured statistic per step (x: step failed it) against its threshold (red dashed). "
        "The open circle is each run's capacity: the highest step below the first one that fails (an SLO, or the "
        "error-rate limit: see the table above).",
        finish(figure, 420, "SLO checks per step"),
    )


def mbu_chart(runs: list[RunData], rows: pd.DataFrame, hardware: Hardware) -> Chart | None:
    """MBU (%) per step from TPOT p50, against the load."""
    if rows.empty:
        return None
    figure = go.Figure()
    for i, run in enumerate(runs):
        frame = rows[rows["run"] == run.name]
        if frame.empty:
            continue
        tpot = frame["tpot_ms_p50"].tolist()
        values = [None if (u := mbu(hardware, t)) is None else 100 * u for t in tpot]
        achieved = [achieved_bandwidth_gbs(hardware, t) for t in tpot]
        figure.add_trace(
            go.Scatter(
                x=frame[load_axis(run)[0]].to_numpy(dtype=float), y=values, customdata=achieved, mode="lines+markers",
                name=run.name, line={"color": run_color(i)}, text=frame["label"].tolist(),
                meta={"run": run.name, "metric": "mbu_percent"},
                hovertemplate="%{text}<br>MBU %{y:.1f} %<br>%{customdata:.0f} GB/s<extra>" + run.name + "</extra>",
            )
        )  # fmt: skip
    figure.update_xaxes(title_text=_load_title(runs))
    figure.update_yaxes(title_text="MBU (%)", rangemode="tozero")
    return Chart(
        "mbu",
        "Memory bandwidth utilisation",
        f"MBU = (weights {hardware.model_params_b:g} B params x {hardware.bytes_per_param:g} bytes + KV cache "
        f"{hardware.kv_cache_gb:g} GB) / TPOT p50 / peak {hardware.peak_bandwidth_gbs:g} GB/s. Meaningful at low "
        "batch, where decoding is memory bound.",
        finish(figure, 380, "Memory bandwidth utilisation (from TPOT p50)"),
    )
