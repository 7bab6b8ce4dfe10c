"""The HTML page of `llm-locust history`: the gate on the newest run, the table of runs with their verdicts, the
newest run's changes against its baseline, and each key metric's trend over the runs (start date on the x axis,
the latencies' p50 line with p90 and p99 bands, each judged point marked by its verdict). The report's page and
figure machinery (`html`, `figure`) and compare's table of changes (`compare_page.changes_section`)."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from llm_locust.metrics.declarations import latencies
from llm_locust.metrics.vocabulary import SERIES_PERCENTILES, latency_key
from llm_locust.report.compare_page import changes_section
from llm_locust.report.compare_result import IMPROVEMENT, REGRESSION
from llm_locust.report.figure import Chart, finish, latency_title, run_color, with_alpha
from llm_locust.report.history import EFFICIENCY, History, Judgement, summary_value
from llm_locust.report.html import Section, note, paragraph, render, table, write_page

_MARKS = {REGRESSION: ("#c62828", "x"), IMPROVEMENT: ("#2e7d32", "triangle-down")}
THROUGHPUT = (("output_tokens_per_s", "output tok/s"), ("requests_per_s", "requests/s"))
"""The throughput trends: summary.json's `throughput` key (also compare's metric name) and its label."""


def write_history_page(history: History, output: Path) -> Path:
    """Write the history's page to `output` atomically (temp file + rename); return `output`."""
    shown = [j for j in history.judgements if not j.run.left_out]
    charts = [*_latency_charts(shown), _throughput_chart(shown)]
    efficiency = _efficiency_chart(shown)
    if efficiency is not None:
        charts.append(efficiency)
    runs = history.judgements
    title = f"llm-locust history: {len(runs)} run(s), {_day(runs[0])} – {_day(runs[-1])}"
    subtitle = f"each run against the {history.baseline_runs} run(s) before it"
    left_out = [j for j in runs if j.run.left_out]
    banners = [f"{len(left_out)} run(s) left out, listed with why in the table"] if left_out else []
    page = render(title, subtitle, banners, _sections(history), charts)
    return write_page(output, page)


def _day(judgement: Judgement) -> str:
    return judgement.run.started.strftime("%Y-%m-%d %H:%M")


def _sections(history: History) -> list[Section]:
    """The gate and the runs' table; then the newest run's changes when it was compared."""
    parts = [paragraph(history.gate_line(), "nopick" if history.gate_failed else "pick"), _runs_table(history)]
    parts.append(
        note(
            "Verdicts: compare's bootstrap of each run's whole time windows against those of its baseline, the runs "
            "before it (left-out runs and runs of other sweep steps skipped) as repeated runs of one side; a "
            "regression or improvement is a change whose whole interval lies beyond the min-change band. The "
            "trends show each run's summary.json figures (percentiles over all its requests)."
        )
    )
    sections = [Section("Runs", parts)]
    newest = history.newest
    if newest.comparison is not None:
        level = f"{100 * newest.comparison.confidence:g} %"
        title = f"The newest run, {newest.run.name}, against its baseline"
        section = changes_section(newest.comparison, level, title, history.gate_name)
        section.parts.extend(note(text) for text in newest.comparison.notes)
        sections.append(section)
    return sections


def _present_efficiency(judgements: list[Judgement]) -> list[tuple[str, str, str]]:
    """The energy and cost figures that at least one run has."""
    return [e for e in EFFICIENCY if any(summary_value(j.run.summary, e[0], e[1]) is not None for j in judgements)]


def _runs_table(history: History) -> str:
    """One row per run, oldest first: start, folder, verdict, baseline size, what changed, key figures."""
    efficiency = _present_efficiency(list(history.judgements))
    figures = [(("metrics", latency_key(m.name), "p50"), f"{m.label} p50 ms") for m in latencies(slo=True, series=True)]
    figures += [(("throughput", key), label) for key, label in THROUGHPUT]
    figures += [(("throughput", "requests_failed"), "failed requests")]
    figures += [((group, key), label) for group, key, label in efficiency]
    headers = ["start", "run", "verdict", "baseline runs", "regressions", "improvements", *(f[1] for f in figures),
               "run's own gates", "left out because"]  # fmt: skip
    body, classes = [], []
    for j in history.judgements:
        values = [summary_value(j.run.summary, *keys) for keys, _ in figures]
        row = [j.run.started.strftime("%Y-%m-%d %H:%M:%S %z"), j.run.name, j.verdict, len(j.baseline),
               "; ".join(j.changes(REGRESSION)) or None, "; ".join(j.changes(IMPROVEMENT)) or None, *values,
               _own_gates(j.run.summary), j.run.left_out or None]  # fmt: skip
        body.append(row)
        css = "fail" if j.verdict == REGRESSION else "ok" if j.verdict == IMPROVEMENT else "t"
        own = "fail" if str(row[-2]).startswith("FAILED") else "t"
        classes.append(["t", "t", css, "", "t", "t", *([""] * (len(row) - 8)), own, "t"])
    return table(headers, body, classes)


def _own_gates(summary: dict) -> str | None:
    """The run's own verdict (its --slo, --max-error-rate, --max-drift-pct, ... gates): passed, FAILED with the
    reasons, or None when the summary has none."""
    verdict = summary.get("verdict")
    if not isinstance(verdict, dict):
        return None
    return "passed" if verdict.get("passed") else "FAILED: " + "; ".join(map(str, verdict.get("reasons") or []))


def _dates(judgements: list[Judgement]) -> list[str]:
    """The runs' starts as the x values (ISO 8601: plotly draws a date axis)."""
    return [j.run.started.isoformat() for j in judgements]


def _verdict_marks(figure: go.Figure, judgements: list[Judgement], series: list[tuple[str, list[float | None]]],
                   row: int | None = None) -> None:  # fmt: skip
    """Mark the points of `series` (compared metric name, its value per run) whose run's verdict on that metric is a
    regression or an improvement: one trace per verdict, its `meta` naming the verdict, each point's text the
    metric."""
    dates = _dates(judgements)
    for verdict, (color, symbol) in _MARKS.items():
        picked = [(x, v, metric) for metric, values in series
                  for j, x, v in zip(judgements, dates, values, strict=True)
                  if v is not None and j.metric_verdict(metric) == verdict]  # fmt: skip
        if not picked:
            continue
        trace = go.Scatter(
            x=[x for x, _, _ in picked], y=[v for _, v, _ in picked], text=[m for _, _, m in picked],
            mode="markers", name=verdict, meta={"verdict": verdict}, hovertemplate="%{text}: %{y}<extra></extra>",
            marker={"color": color, "symbol": symbol, "size": 13, "line": {"width": 2, "color": color}},
        )  # fmt: skip
        figure.add_trace(trace, row=row, col=None if row is None else 1)


def _latency_charts(judgements: list[Judgement]) -> list[Chart]:
    """A chart per compared latency: p50 line, p90 and p99 bands above it, over the runs' dates."""
    charts = []
    for number, metric in enumerate(latencies(slo=True, series=True)):
        figure = go.Figure()
        color = run_color(number)
        columns = {p: [summary_value(j.run.summary, "metrics", latency_key(metric.name), p) for j in judgements]
                   for p in SERIES_PERCENTILES}  # fmt: skip
        for p, alpha in zip(SERIES_PERCENTILES, (1.0, 0.35, 0.15), strict=True):
            first = p == SERIES_PERCENTILES[0]
            figure.add_trace(
                go.Scatter(
                    x=_dates(judgements), y=columns[p], name=p, meta={"percentile": p, "metric": metric.name},
                    mode="lines+markers" if first else "lines",
                    line={"color": color if first else with_alpha(color, 0.6), "width": 2 if first else 1},
                    fill=None if first else "tonexty", fillcolor=with_alpha(color, alpha),
                )
            )  # fmt: skip
        _verdict_marks(figure, judgements, [(f"{metric.name}_{p}_ms", columns[p]) for p in SERIES_PERCENTILES])
        finish(figure, 380, f"{latency_title(metric.name)} over the runs")
        figure.update_yaxes(title_text=f"{metric.label}, ms", rangemode="tozero")
        figure.update_xaxes(title_text="run start")
        charts.append(
            Chart(
                f"history_{metric.name}",
                f"{latency_title(metric.name)} over the runs",
                "Each run's p50 (line), up to its p90 and p99 (bands). A cross marks a percentile that regressed "
                "against the run's baseline, a green triangle one that improved.",
                figure,
            )
        )
    return charts


def _rows_chart(key: str, title: str, description: str, judgements: list[Judgement],
                rows: list[tuple[str, list[float | None], str | None]]) -> Chart:  # fmt: skip
    """A chart of one panel per row (label, values per run, compared metric name or None), sharing the dates."""
    figure = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, subplot_titles=[label for label, _, _ in rows],
                           vertical_spacing=0.12)  # fmt: skip
    for index, (label, values, metric) in enumerate(rows, start=1):
        figure.add_trace(
            go.Scatter(x=_dates(judgements), y=values, name=label, mode="lines+markers", meta={"series": label},
                       line={"color": run_color(index - 1)}),
            row=index, col=1,
        )  # fmt: skip
        if metric is not None:
            _verdict_marks(figure, judgements, [(metric, values)], row=index)
        figure.update_yaxes(rangemode="tozero", row=index, col=1)
    finish(figure, 120 + 240 * len(rows), title)
    figure.update_xaxes(title_text="run start", row=len(rows), col=1)
    return Chart(key, title, description, figure)


def _throughput_chart(judgements: list[Judgement]) -> Chart:
    """Output tokens/s and requests/s over the runs, judged points marked."""
    rows = [(label, [summary_value(j.run.summary, "throughput", key) for j in judgements], key)
            for key, label in THROUGHPUT]  # fmt: skip
    return _rows_chart("history_throughput", "Throughput over the runs",
                       "Each run's output tokens/s and successful requests/s over its whole duration; marks as above.",
                       judgements, rows)  # fmt: skip


def _efficiency_chart(judgements: list[Judgement]) -> Chart | None:
    """summary.json's energy and cost figures over the runs, one panel each; None when no run has any."""
    present = _present_efficiency(judgements)
    if not present:
        return None
    rows = [(label, [summary_value(j.run.summary, group, key) for j in judgements], None)
            for group, key, label in present]  # fmt: skip
    return _rows_chart("history_efficiency", "Energy and cost over the runs",
                       "Each run's energy (from the DCGM power scraped) and cost (--cost-per-hour) figures; not "
                       "judged.", judgements, rows)  # fmt: skip
