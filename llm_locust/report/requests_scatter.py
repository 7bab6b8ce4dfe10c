"""requests.jsonl in the report: each request's TTFT against the time it was sent (`--requests-jsonl`).

A scatter shows what percentiles hide: a burst of slow first tokens at one moment (a stall, a restart, a queue),
the bands of requests that waited for a batch slot, the outliers to look up in the server's logs by their id (shown
on hover).
"""

from __future__ import annotations

import plotly.graph_objects as go

from llm_locust.report.figure import Chart, finish, run_color
from llm_locust.report.run_data import RunData
from llm_locust.report.timeline import start_epoch_s, time_unit

MAX_POINTS = 20_000
"""Points drawn per run at most (every k-th request beyond: the page stays light for a long soak's file)."""
_SYMBOLS = {"ok": "circle", "failed": "x", "cancelled": "triangle-down"}


def ttft_scatter(runs: list[RunData]) -> Chart | None:
    """TTFT (ms) of each request against its send time, one colour per run (None when no run has requests.jsonl
    lines with a first token)."""
    drawn = [
        (i, run, run.requests) for i, run in enumerate(runs) if run.requests is not None and not run.requests.empty
    ]
    if not drawn:
        return None
    starts = {run.name: start_epoch_s(run) or float(frame["t_send"].min()) for _, run, frame in drawn}
    span_s = max(float(frame["t_send"].max()) - starts[run.name] for _, run, frame in drawn)
    unit_s, axis_title = time_unit(span_s)
    figure = go.Figure()
    thinned = []
    for i, run, frame in drawn:
        step = -(-len(frame) // MAX_POINTS)
        if step > 1:
            thinned.append(f"{run.name}: every {step}th of {len(frame)} requests")
            frame = frame.iloc[::step]
        for outcome, rows in frame.groupby("outcome", sort=False):
            marker = {"color": run_color(i), "size": 4, "opacity": 0.6, "symbol": _SYMBOLS.get(str(outcome), "circle")}
            figure.add_trace(
                go.Scattergl(
                    x=(rows["t_send"].to_numpy(dtype=float) - starts[run.name]) / unit_s,
                    y=rows["ttft_ms"].to_numpy(dtype=float), mode="markers", name=f"{run.name} {outcome}",
                    legendgroup=run.name, text=rows["request_id"].fillna("").to_list(), marker=marker,
                    meta={"run": run.name, "outcome": outcome},
                    hovertemplate="sent %{x:.4g}: TTFT %{y:.4g} ms<br>%{text}<extra>" + run.name + "</extra>",
                )
            )  # fmt: skip
    figure.update_xaxes(title_text=axis_title.replace("time since start", "sent, time since start"))
    figure.update_yaxes(title_text="TTFT (ms)", rangemode="tozero")
    thin_note = f" Thinned to {MAX_POINTS} points per run: {'; '.join(thinned)}." if thinned else ""
    return Chart(
        "ttft_scatter",
        "TTFT of each request against its send time",
        "One point per request of requests.jsonl (--requests-jsonl) that got a first token: its TTFT against when it "
        "was sent; failed requests as x, cancelled ones as triangles. Hover a point for the server's request id."
        + thin_note,
        finish(figure, 500, "TTFT of each request against its send time"),
    )
