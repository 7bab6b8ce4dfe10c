"""A trace replay in the report: what the trace offered over time beside what was achieved.

Offered (trace_offered.csv, by due time): requests/s, mean input and output tokens per request, expected prefix
reuse. Achieved (llm_timeseries.csv, by completion time, so shifted by the latency): requests/s and mean output
tokens per finished request.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.report.figure import Chart, finish, run_color
from llm_locust.report.run_data import RunData
from llm_locust.report.timeline import time_unit


def trace_chart(runs: list[RunData]) -> Chart | None:
    """Offered vs achieved rate and lengths per interval, for the runs that replayed a trace (None if none did)."""
    replays = [(i, run) for i, run in enumerate(runs) if run.trace_offered is not None and not run.trace_offered.empty]
    if not replays:
        return None
    span_s = max(float(run.trace_offered["elapsed_s"].max()) for _, run in replays)
    unit_s, axis_title = time_unit(span_s)
    panels = ["requests/s", "tokens per request", "expected prefix reuse"]
    figure = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=panels, vertical_spacing=0.08)
    for i, run in replays:
        color, name = run_color(i), run.name
        offered = run.trace_offered
        x = offered["elapsed_s"].to_numpy(dtype=float) / unit_s
        lines = [
            (1, x, offered["offered_rate_per_s"], "offered req/s", "dash"),
            (2, x, offered["input_tokens_mean"], "offered input tokens", "dash"),
            (2, x, offered["output_tokens_mean"], "offered output tokens", "dot"),
            (3, x, offered["expected_reuse"], "expected reuse", "dash"),
        ]
        achieved = run.timeseries
        if achieved is not None and not achieved.empty:
            ax = achieved["elapsed_s"].to_numpy(dtype=float) / unit_s
            per_request = achieved["output_tokens_per_s"] / achieved["requests_per_s"].where(
                achieved["requests_per_s"] > 0
            )
            lines += [(1, ax, achieved["requests_per_s"], "achieved req/s", None),
                      (2, ax, per_request, "achieved output tokens", None)]  # fmt: skip
        for row, xs, ys, label, dash in lines:
            figure.add_trace(
                go.Scatter(
                    x=xs, y=ys.to_numpy(dtype=float), mode="lines", name=f"{name} {label}", legendgroup=name,
                    line={"color": color, "dash": dash, "width": 1.2}, meta={"run": name, "label": label},
                    hovertemplate="%{x:.4g}: %{y:.4g} " + label + "<extra>" + name + "</extra>",
                ),
                row=row, col=1,
            )  # fmt: skip
    figure.update_xaxes(title_text=axis_title, row=len(panels), col=1)
    return Chart(
        "trace_replay",
        "Trace replay: offered vs achieved",
        "Offered (dashed, trace_offered.csv): what the trace had due in each interval. Achieved (solid, "
        "llm_timeseries.csv): the requests that finished in each interval, so later by their latency. Expected "
        "prefix reuse: of the whole 512-token blocks due, the share an earlier request of the replay had.",
        finish(figure, 800, "Trace replay: offered vs achieved"),
    )
