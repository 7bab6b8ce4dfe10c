"""Input length as a load variable: TTFT and throughput against each request's prompt length, the grid's heat map,
and the capacity under the SLOs read per prompt length.

Points come from a length sweep's steps (`steps[].prompt_tokens` set; one line per load, and per output length when
that is swept too) or, for a run whose lengths vary otherwise (`uniform:`, a dataset), from its "prompt_tokens"
breakdown (power-of-two buckets; one line per step, or "run"). x is a point's mean input length: the server's
usage.prompt_tokens summed over its requests, divided by their number. Prefill throughput is that input length per
second of the point's TTFT p50 (input tokens / TTFT). Every trace carries `meta = {"run", "series", "metric", "stat"}`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.errors import ConfigError
from llm_locust.metrics.length_buckets import DIMENSION
from llm_locust.metrics.slo import Slo
from llm_locust.report.capacity import Capacity, capacity
from llm_locust.report.figure import Chart, finish, run_color
from llm_locust.report.html import Section, heading, note, paragraph, table
from llm_locust.report.run_data import RunData
from llm_locust.report.tables import step_rows

TTFT_STATS = ("p50", "p90", "p99")
DEFAULT_GRID_METRIC = "ttft_ms_p90"
LENGTH_COLUMNS = {
    "label": "step or bucket", "series": "load", "prompt_tokens": "prompt tokens (asked)",
    "input_tokens": "input tokens (mean)", "requests_ok": "ok", "ttft_ms_p50": "TTFT p50 ms",
    "ttft_ms_p90": "TTFT p90 ms", "ttft_ms_p99": "TTFT p99 ms", "prefill_tokens_per_s": "prefill tok/s",
    "output_tokens_per_s": "output tok/s",
}  # fmt: skip


def length_rows(run: RunData) -> pd.DataFrame:
    """One row per point of `run` against input length (module docstring): run, series, label, step, kind ("step" or
    "bucket"), prompt_tokens (the step's asked length, or the bucket's label), input_tokens (mean, tokens),
    requests_ok, ttft_ms_p50/p90/p99, prefill_tokens_per_s (input tokens per second of TTFT p50),
    output_tokens_per_s (steps only: a bucket's share of a run's throughput says nothing per length). Empty when the
    run neither swept the prompt length nor recorded the breakdown."""
    steps = run.steps
    swept = [step for step in steps if step.get("prompt_tokens")]
    if swept:
        points = [(step, "step", _series(step), step["prompt_tokens"]) for step in swept]
    else:
        labels = {step.get("index", i): step.get("label") for i, step in enumerate(steps)}
        buckets = ((run.summary or {}).get("breakdowns") or {}).get(DIMENSION) or []
        points = [(b, "bucket", labels.get(b["step"], "run") if b["step"] is not None else "run", b["label"])
                  for b in buckets]  # fmt: skip
    rows = []
    for source, kind, series, asked in points:
        throughput = source.get("throughput") or {}
        ok = source.get("requests_ok", throughput.get("requests_ok")) or 0
        ttft = (source.get("metrics") or {}).get("ttft_ms") or {}
        input_tokens = throughput.get("prompt_tokens", 0) / ok if ok and throughput.get("prompt_tokens") else None
        if input_tokens is None and kind == "step":
            input_tokens = float(asked)
        p50 = ttft.get("p50")
        rows.append(
            {
                "run": run.name,
                "series": series,
                "label": source.get("label"),
                "step": source.get("index") if kind == "step" else source.get("step"),
                "kind": kind,
                "prompt_tokens": asked,
                "input_tokens": input_tokens,
                "requests_ok": ok,
                **{f"ttft_ms_{stat}": ttft.get(stat) for stat in TTFT_STATS},
                "prefill_tokens_per_s": input_tokens / (p50 / 1e3) if input_tokens and p50 else None,
                "output_tokens_per_s": throughput.get("output_tokens_per_s") if kind == "step" else None,
            }
        )
    return pd.DataFrame(rows)


def _series(step: dict[str, Any]) -> str:
    """The line a length-sweep step belongs to: its load (`users=4`, `rate=2/s`), and its output length if swept."""
    load = f"users={step['users']}" if step.get("rate_per_s") is None else f"rate={step['rate_per_s']:g}/s"
    return load + (f" max={step['max_tokens']}" if step.get("max_tokens") else "")


def all_length_rows(runs: list[RunData]) -> pd.DataFrame:
    """`length_rows` of every run, one frame (empty when no run has any)."""
    frames = [frame for frame in (length_rows(run) for run in runs) if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _lines(rows: pd.DataFrame, runs: list[RunData]) -> list[tuple[str, str, str, pd.DataFrame]]:
    """(run, series, colour, its rows sorted by input length) per line; a run's lines share its colour when there
    is one run, else each run has its colour and its lines differ in dash."""
    lines = []
    for i, run in enumerate(runs):
        frame = rows[rows["run"] == run.name]
        for j, (series, part) in enumerate(frame.groupby("series", sort=False)):
            color = run_color(j) if len(runs) == 1 else run_color(i)
            lines.append((run.name, str(series), color, part.sort_values("input_tokens")))
    return lines


def _scatter(part: pd.DataFrame, run: str, series: str, color: str, metric: str, stat: str | None) -> go.Scatter:
    column = f"{metric}_{stat}" if stat else metric
    name = series if run == "" else f"{run} {series}"
    return go.Scatter(
        x=part["input_tokens"].to_numpy(dtype=float), y=part[column].to_numpy(dtype=float),
        text=part["label"].tolist(), mode="lines+markers", name=name, legendgroup=name,
        line={"color": color, "dash": "solid" if stat in (None, "p50") else "dot" if stat == "p90" else "dash"},
        meta={"run": run, "series": series, "metric": metric, "stat": stat},
        hovertemplate="%{text}<br>input %{x:.4g} tokens<br>%{y:.4g}<extra>" + name + "</extra>",
    )  # fmt: skip


def ttft_vs_length(runs: list[RunData], rows: pd.DataFrame) -> Chart | None:
    """TTFT p50, p90 and p99 against mean input length, one line per load (or step, or the run)."""
    if rows.empty:
        return None
    figure = make_subplots(rows=1, cols=3, subplot_titles=[f"TTFT {s} (ms)" for s in TTFT_STATS])
    for run, series, color, part in _lines(rows, runs):
        for col, stat in enumerate(TTFT_STATS, start=1):
            trace = _scatter(part, run, series, color, "ttft_ms", stat)
            trace.showlegend = col == 1
            figure.add_trace(trace, row=1, col=col)
    figure.update_xaxes(title_text="input tokens (mean)", type="log")
    return Chart(
        "ttft_vs_length",
        "TTFT against input length",
        "One point per length step (or per power-of-two prompt-length bucket of a run whose lengths vary), at its "
        "mean input length (the server's count); one line per concurrency or rate. Prefill is charged per input "
        "token: TTFT grows with the prompt.",
        finish(figure, 430, "TTFT against input length"),
    )


def throughput_vs_length(runs: list[RunData], rows: pd.DataFrame) -> Chart | None:
    """Output tokens/s (length steps) and prefill throughput (input tokens per second of TTFT p50) against input
    length, one line per load."""
    if rows.empty:
        return None
    titles = ["output tokens/s (length steps)", "prefill: input tokens per second of TTFT p50"]
    figure = make_subplots(rows=1, cols=2, subplot_titles=titles)
    for run, series, color, part in _lines(rows, runs):
        steps = part[part["kind"] == "step"]
        if not steps.empty:
            figure.add_trace(_scatter(steps, run, series, color, "output_tokens_per_s", None), row=1, col=1)
        trace = _scatter(part, run, series, color, "prefill_tokens_per_s", None)
        trace.showlegend = steps.empty
        figure.add_trace(trace, row=1, col=2)
    figure.update_xaxes(title_text="input tokens (mean)", type="log")
    return Chart(
        "throughput_vs_length",
        "Throughput against input length",
        "Left: output tokens/s of each length step (longer prompts leave less of each engine step to decode). "
        "Right: prefill throughput, the mean input length divided by TTFT p50.",
        finish(figure, 430, "Throughput against input length"),
    )


def grid_heatmap(runs: list[RunData], metric: str) -> Chart | None:
    """A heat map per run of its grid (rows: load and output length, columns: prompt length) coloured by `metric`, a
    step-table column such as ttft_ms_p90 or output_tokens_per_s; None without a grid (two lengths and two loads)."""
    figures = []
    for run in runs:
        frame = _grid_frame(run)
        if frame.empty or frame["prompt_tokens"].nunique() < 2 or frame["series"].nunique() < 2:
            continue
        if metric not in frame.columns:
            numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
            raise ConfigError(f"--grid-metric {metric!r}: not a step column; one of {', '.join(numeric)}")
        grid = frame.pivot_table(index="series", columns="prompt_tokens", values=metric, sort=False)
        figures.append((run.name, grid))
    if not figures:
        return None
    figure = make_subplots(rows=len(figures), cols=1, subplot_titles=[name for name, _ in figures])
    for row, (name, grid) in enumerate(figures, start=1):
        z = grid.to_numpy(dtype=float)
        figure.add_trace(
            go.Heatmap(
                z=z, x=[str(c) for c in grid.columns], y=list(grid.index), coloraxis="coloraxis",
                text=[[f"{v:.4g}" for v in line] for line in z], texttemplate="%{text}",
                meta={"run": name, "metric": metric},
                hovertemplate="prompt %{x} tokens<br>%{y}<br>" + metric + " %{z:.4g}<extra>" + name + "</extra>",
            ),
            row=row, col=1,
        )  # fmt: skip
        figure.update_xaxes(title_text="prompt tokens", type="category", row=row, col=1)
    figure.update_layout(coloraxis={"colorscale": "Viridis", "colorbar": {"title": metric}})
    return Chart(
        "grid_heatmap",
        f"Grid: {metric} by load and prompt length",
        "One cell per step of the grid (--grid-metric of the report chooses the metric).",
        finish(figure, 150 + 280 * len(figures), f"{metric} by load and prompt length"),
    )


def _grid_frame(run: RunData) -> pd.DataFrame:
    """`step_rows` of `run`'s length steps with their series and prompt length (empty when none)."""
    swept = {step.get("index", i): step for i, step in enumerate(run.steps) if step.get("prompt_tokens")}
    frame = step_rows(run)
    if not swept or frame.empty:
        return pd.DataFrame()
    frame = frame[frame["step"].isin(list(swept))].copy()
    frame["series"] = [_series(swept[int(i)]) for i in frame["step"]]
    frame["prompt_tokens"] = [swept[int(i)]["prompt_tokens"] for i in frame["step"]]
    return frame


def capacity_by_length(run: RunData, slos: tuple[Slo, ...], max_error_rate: float | None = None) -> dict[str, Capacity]:
    """Per prompt length (and output length, when swept) of `run`'s length sweep — keyed "prompt=512" or
    "prompt=512 max=128" — `report.capacity.capacity` over the steps of that length: the load sweep at that length;
    {} without SLOs or length steps."""
    by_length: dict[str, Capacity] = {}
    if not slos or run.summary is None:
        return by_length
    for step in run.steps:
        lengths = (step.get("prompt_tokens"), step.get("max_tokens"))
        key = f"prompt={lengths[0]}" + (f" max={lengths[1]}" if lengths[1] else "")
        if not lengths[0] or key in by_length:
            continue
        same = [s for s in run.steps if (s.get("prompt_tokens"), s.get("max_tokens")) == lengths]
        found = capacity(RunData(run.path, run.name, summary={**run.summary, "steps": same}), slos, max_error_rate)
        if found is not None:
            by_length[key] = found
    return by_length


def length_section(
    runs: list[RunData], rows: pd.DataFrame, slos: tuple[Slo, ...], max_error_rate: float | None = None
) -> Section | None:
    """Per run: each point's table row, how exact its lengths are, and the capacity at each prompt length
    (`max_error_rate` as in `report.capacity.capacity`)."""
    if rows.empty:
        return None
    section = Section("Input length")
    for run in runs:
        frame = rows[rows["run"] == run.name]
        if frame.empty:
            continue
        columns = [c for c in LENGTH_COLUMNS if frame[c].notna().any()]
        body = frame[columns].astype(object).where(frame[columns].notna(), None).to_numpy().tolist()
        section.parts += [heading(run.name) if len(runs) > 1 else "", table([LENGTH_COLUMNS[c] for c in columns], body)]
        exactness = ((run.summary or {}).get("load") or {}).get("prompt_lengths")
        if exactness:
            section.parts.append(note(f"Prompt lengths: {exactness}."))
        for lengths, cap in capacity_by_length(run, slos, max_error_rate).items():
            best = cap.best
            text = (
                f"{lengths}: capacity {best.label}, {best.output_tokens_per_s:,.1f} output tok/s"
                if best is not None
                else f"{lengths}: no step meets every SLO"
            )
            section.parts.append(paragraph(text, "pick" if best is not None else "nopick"))
    return section
