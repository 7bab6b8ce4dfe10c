"""The HTML page of `llm-locust compare`: the sides, the table of changes with their intervals, the gate, and a
chart of every change with its interval (the report's page and chart machinery: `html`, `figure`)."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from llm_locust.report.compare_result import IMPROVEMENT, NO_DATA, REGRESSION, Comparison, MetricResult, gate_line
from llm_locust.report.figure import Chart, finish
from llm_locust.report.html import Section, note, paragraph, render, table, write_page
from llm_locust.report.tables import run_facts

_COLORS = {REGRESSION: "#c62828", IMPROVEMENT: "#2e7d32"}
_NEUTRAL = "#555555"


def write_compare_page(comparison: Comparison, output: Path) -> Path:
    """Write the comparison's page to `output` atomically (temp file + rename); return `output`."""
    level = f"{100 * comparison.confidence:g} %"
    sections = [_sides(comparison), changes_section(comparison, level)]
    chart = changes_chart(comparison, level)
    names = f"{_names(comparison.baseline)} → {_names(comparison.candidate)}"
    page = render(f"llm-locust compare: {names}", "baseline → candidate", comparison.notes, sections, [chart])
    return write_page(output, page)


def _names(runs: list) -> str:
    return ", ".join(run.name for run in runs)


def _sides(comparison: Comparison) -> Section:
    """Each run of each side: its folder, target, model, load, duration and the whole windows used."""
    headers = ["side", "folder", "target", "model", "load model", "duration s", "whole windows"]
    body = []
    for side, runs in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
        for run, windows in zip(runs, comparison.windows[side], strict=True):
            facts = run_facts(run)
            body.append([side, facts.get("folder"), facts.get("target"), facts.get("model"), facts.get("load model"),
                         facts.get("duration s"), windows])  # fmt: skip
    return Section("Sides", [table(headers, body)])


def changes_section(comparison: Comparison, level: str, title: str = "Changes", command: str = "Compare") -> Section:
    """The gate's verdict (its line starting with `command`), then one row per metric: values, change, interval,
    verdict, limit; under the heading `title`."""
    passed = not comparison.failed
    parts = [paragraph(gate_line(comparison, command), "pick" if passed else "nopick")]
    headers = ["metric", "scope", "baseline", "candidate", "difference", "change %", f"{level} interval, %",
               "verdict", "limit %"]  # fmt: skip
    body, classes = [], []
    for r in comparison.results:
        interval = None if r.low is None else f"[{100 * r.low:+.2f}, {100 * r.high:+.2f}]"
        change = None if r.change is None else round(100 * r.change, 2)
        limit = None if r.limit is None else round(100 * r.limit, 2)
        body.append([r.metric.name, r.scope, r.baseline, r.candidate, r.difference, change, interval, r.verdict, limit])
        css = "fail" if r.verdict == REGRESSION else "ok" if r.verdict == IMPROVEMENT else "t"
        classes.append(["", "t", "", "", "", "", "t", css, "fail" if r.gate_failed else ""])
    parts.append(table(headers, body, classes))
    parts.append(
        note(
            f"Change = candidate / baseline - 1. Interval: {level} percentile bootstrap ({comparison.resamples} "
            f"resamples, seed {comparison.seed}) over the whole time windows of each run and over the runs of each "
            f"side. A regression or improvement is a change whose whole interval lies beyond "
            f"±{100 * comparison.min_change:g} %; the gate fails a metric whose whole interval lies beyond its limit "
            "on the worse side. Latencies: higher is worse; tokens/s and requests/s: lower is worse. Accuracy (of "
            "the scored answers): change and interval in percentage points (candidate - baseline), judged by the "
            "two-proportion z-test (significant at p < 1 - the interval's level, and beyond the min-change band in "
            "points)."
        )
    )
    return Section(title, parts)


def _row_label(result: MetricResult) -> str:
    """The chart's row of a result: the metric, prefixed with the step's label in sweeps."""
    return result.metric.name if result.scope == "run" else f"{result.scope}: {result.metric.name}"


def changes_chart(comparison: Comparison, level: str) -> Chart:
    """Every metric's change (%) with its interval as an error bar, coloured by verdict, the ±min-change band
    shaded; each trace's `meta` names its verdict (tests read the figure back)."""
    figure = go.Figure()
    band = 100 * comparison.min_change
    figure.add_vrect(x0=-band, x1=band, fillcolor="rgba(120,120,120,0.15)", line_width=0)
    figure.add_vline(x=0, line={"color": "#888", "width": 1})
    shown = [r for r in comparison.results if r.verdict != NO_DATA and r.change is not None]
    for verdict in dict.fromkeys(r.verdict for r in shown):
        group = [r for r in shown if r.verdict == verdict]
        figure.add_trace(
            go.Scatter(
                x=[100 * r.change for r in group],
                y=[_row_label(r) for r in group],
                mode="markers",
                name=verdict,
                meta={"verdict": verdict},
                marker={"color": _COLORS.get(verdict, _NEUTRAL), "size": 9},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [100 * (r.high - r.change) for r in group],
                    "arrayminus": [100 * (r.change - r.low) for r in group],
                },
                hovertemplate="%{y}: %{x:+.2f} %<extra>" + verdict + "</extra>",
            )
        )
    height = max(360, 28 * len(shown) + 160)
    finish(figure, height, f"Change from baseline to candidate, with {level} intervals")
    figure.update_xaxes(title_text="change, % (candidate / baseline - 1)", zeroline=False)
    figure.update_yaxes(categoryorder="array", categoryarray=[_row_label(r) for r in shown], autorange="reversed")
    return Chart(
        "compare_changes",
        "Changes with their intervals",
        f"One row per metric: the dot is the change, the bar its {level} bootstrap interval; the grey band is "
        "±min-change, inside which no change counts. Red: regression; green: improvement.",
        figure,
    )
