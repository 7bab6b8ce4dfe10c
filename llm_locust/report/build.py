"""`build_report`: results folders in, one HTML report (and a folder of PNG charts) out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from llm_locust.apis import summary_rates
from llm_locust.errors import ConfigError
from llm_locust.load.search import search_line
from llm_locust.metrics.slo import Slo, parse_slos
from llm_locust.report import (
    agent,
    charts,
    distributions,
    lengths,
    requests_scatter,
    reuse,
    server,
    telemetry_charts,
    timeline,
    trace_replay,
)
from llm_locust.report.breakdowns import breakdown_section
from llm_locust.report.capacity import Capacity, CheckedStep, capacity
from llm_locust.report.figure import Chart
from llm_locust.report.html import Section, heading, note, paragraph, render, table, write_page
from llm_locust.report.images import write_pngs
from llm_locust.report.mbu import Hardware, mbu
from llm_locust.report.run_data import RunData, load_run
from llm_locust.report.tables import (
    ACCURACY_COLUMNS,
    EFFICIENCY_COLUMNS,
    all_step_rows,
    cells_with_intervals,
    comparison_table,
    latency_table_columns,
    run_facts,
    warnings_of,
)

STEP_COLUMNS = {
    "label": "step", "users": "users", "rate_per_s": "offered req/s", "achieved_rate_per_s": "achieved req/s",
    "output_tokens_per_s": "output tok/s", "inputs_per_s": "inputs/s", "input_tokens_per_s": "input tok/s",
    "output_bytes_per_input": "bytes/input", "requests_ok": "ok", "failures": "failed", "ended": "ended by",
}  # fmt: skip
"""The steps table's first columns; then the latencies' (`tables.latency_table_columns`), goodput, SLO attainment,
energy and cost (`tables.EFFICIENCY_COLUMNS`)."""
LOCUST_COLUMNS = ("Type", "Name", "Request Count", "Failure Count", "Average Response Time", "95%", "Requests/s")


@dataclass
class Report:
    """What `build_report` made: the page, the PNGs, and the numbers behind them."""

    html_path: Path
    runs: list[RunData]
    rows: pd.DataFrame
    charts: list[Chart]
    capacities: list[Capacity] = field(default_factory=list)
    png_paths: list[Path] = field(default_factory=list)
    png_skipped: str | None = None


ONE_STEP_NOTE = (
    "One step: no curve to draw. A sweep draws latency against throughput and against load, one point per step: "
    "locust -f locustfiles/sweep.py --sweep-users 1,2,4,8,16,32 --step-duration-s 60 --warmup-s 10 ..."
)
"""What a report of a single-step run says in place of its curve charts."""


def default_output(results_dirs: Sequence[Path]) -> Path:
    """DIR/report.html for one folder, ./report.html for several."""
    return results_dirs[0] / "report.html" if len(results_dirs) == 1 else Path("report.html")


def build_report(
    results_dirs: Sequence[Path],
    output: Path | None = None,
    slos: tuple[Slo, ...] = (),
    hardware: Hardware | None = None,
    png: bool = True,
    max_error_rate: float | None = None,
    grid_metric: str = lengths.DEFAULT_GRID_METRIC,
) -> Report:
    """Load every folder, derive tables and charts, write the HTML (and PNGs unless `png` is False); `grid_metric`
    colours the heat map of a length grid.

    `max_error_rate`: the capacity pick's error-rate limit (default: each run's --max-error-rate, else 0.01).
    Raises ConfigError (one line naming the file) when a folder or one of its files is bad.
    """
    if not results_dirs:
        raise ConfigError("llm-locust report: give at least one results folder")
    runs = [load_run(Path(path)) for path in results_dirs]
    _unique_names(runs)
    output = Path(output) if output else default_output([Path(p) for p in results_dirs])
    if output.is_dir():
        raise ConfigError(f"-o {output}: is a folder; give the report's file name, e.g. {output / 'report.html'}")
    rows = all_step_rows(runs)
    slos_given = bool(slos)
    slos = slos or _recorded_slos(runs)
    capacities = [cap for run in runs if (cap := capacity(run, slos, max_error_rate)) is not None]
    length_rows = lengths.all_length_rows(runs)
    built = [
        charts.throughput_latency(runs, rows, capacities),
        charts.throughput_vs_load(runs, rows),
        charts.latency_vs_load(runs, rows),
        charts.quality_vs_load(runs, rows),
        charts.capacity_chart(runs, capacities),
        lengths.ttft_vs_length(runs, length_rows),
        lengths.throughput_vs_length(runs, length_rows),
        lengths.grid_heatmap(runs, grid_metric),
        charts.mbu_chart(runs, rows, hardware) if hardware is not None else None,
        timeline.llm_timeline(runs),
        requests_scatter.ttft_scatter(runs),
        trace_replay.trace_chart(runs),
        server.server_timeline(runs),
        telemetry_charts.telemetry_timeline(runs),
        timeline.locust_timeline(runs),
        timeline.failures_chart(runs),
        distributions.distributions(runs),
        distributions.step_distributions(runs),
    ]
    chart_list = [chart for chart in built if chart is not None]
    banners = [f"{run.name}: {warning}" for run in runs for warning in warnings_of(run)]
    sections = _sections(runs, rows, capacities, hardware, slos_given)
    if len(rows) == 1:  # one step: numbers and distributions, and how to get the curves
        sections.insert(1, Section("Curves", [note(ONE_STEP_NOTE)]))
    length_part = lengths.length_section(runs, length_rows, slos, max_error_rate)
    if length_part is not None:
        sections.insert(1, length_part)
    names = ", ".join(run.name for run in runs)
    lead = int(bool(chart_list) and chart_list[0].key == "throughput_latency")  # the page opens on the curve
    page = render(f"llm-locust report: {names}", f"{len(runs)} results folder(s)", banners, sections, chart_list, lead)
    write_page(output, page)
    report = Report(output, runs, rows, chart_list, capacities)
    if png:
        report.png_paths, report.png_skipped = write_pngs(chart_list, png_folder(output))
    return report


def png_folder(output: Path) -> Path:
    """Where the PNGs of the report `output` go: `report_png/` beside `report.html`."""
    return output.with_name(output.stem + "_png")


def _recorded_slos(runs: list[RunData]) -> tuple[Slo, ...]:
    """Without --slo: the SLOs the first run that had any was run with (its settings' `slo`)."""
    for run in runs:
        recorded = ((run.summary or {}).get("settings") or {}).get("slo")
        if recorded:
            return parse_slos(recorded)
    return ()


def _unique_names(runs: list[RunData]) -> None:
    """Give runs whose folders share a name their parent's name too (`a/run1`, `b/run1`)."""
    names = [run.name for run in runs]
    for run in runs:
        if names.count(run.name) > 1:
            run.name = f"{run.path.resolve().parent.name}/{run.path.resolve().name}"


def _sections(
    runs: list[RunData], rows: pd.DataFrame, capacities: list[Capacity], hardware: Hardware | None, slos_given: bool
) -> list[Section]:
    """Run metadata, missing data, capacity, comparison, steps and Locust tables."""
    facts = [run_facts(run) for run in runs]
    keys = list(dict.fromkeys(key for fact in facts for key in fact))
    meta = Section("Runs", [table(["", *(run.name for run in runs)], [[k, *(f.get(k) for f in facts)] for k in keys])])
    for run in runs:
        meta.parts += [note(f"{run.name}: missing {item}") for item in run.missing]
    sections = [meta]
    server_part = server.server_section(runs)
    if server_part is not None:
        sections.append(server_part)
    reuse_part = reuse.reuse_section(runs)
    if reuse_part is not None:
        sections.append(reuse_part)
    agent_part = agent.agent_section(runs)
    if agent_part is not None:
        sections.append(agent_part)
    telemetry_part = telemetry_charts.telemetry_section(runs)
    if telemetry_part is not None:
        sections.append(telemetry_part)
    if capacities:
        sections.append(_capacity_section(capacities, runs, slos_given))
    if len(runs) > 1 and not rows.empty:
        picks = {cap.run: cap.best.step for cap in capacities if cap.best is not None}
        chosen = _chosen_rows(rows, picks)
        compared = comparison_table(chosen)
        body = [[index, *values] for index, values in zip(compared.index, compared.to_numpy().tolist(), strict=True)]
        explain = (
            "Each run's capacity step under the SLOs where it has one, else its step with the highest output "
            "tokens/s; the charts overlay every step of every run."
        )
        sections.append(Section("Comparison", [table(["", *compared.columns], body), note(explain)]))
    if not rows.empty:
        steps = Section("Steps")
        step_columns = {**STEP_COLUMNS, **latency_table_columns(), "goodput_requests_per_s": "goodput req/s",
                        "slo_attainment": "SLO attainment", **ACCURACY_COLUMNS,
                        **{key: header for (_, key), header in EFFICIENCY_COLUMNS.items()}}  # fmt: skip
        for run in runs:
            frame = rows[rows["run"] == run.name]
            if frame.empty:
                continue
            units = {rate.key: rate.unit for rate in summary_rates(run.summary or {})}  # "documents/s", "RTF"
            named = {**step_columns, **units}  # a counting's own rates and the media's after the usual columns
            columns = [c for c in named if c in frame.columns and frame[c].notna().any()]
            headers = [units.get(c, named[c]) for c in columns]
            body = cells_with_intervals(frame, columns)
            if hardware is not None:
                headers.append("MBU %")
                for line, tpot in zip(body, frame["tpot_ms_p50"], strict=True):
                    value = mbu(hardware, None if pd.isna(tpot) else float(tpot))
                    line.append(None if value is None else 100 * value)
            steps.parts += [heading(run.name) if len(runs) > 1 else "", table(headers, body)]
        sections.append(steps)
    split = breakdown_section(runs)
    if split is not None:
        sections.append(split)
    locust = Section("Locust's statistics")
    for run in runs:
        if run.locust_stats is None:
            continue
        columns = [c for c in LOCUST_COLUMNS if c in run.locust_stats.columns]
        frame = run.locust_stats[columns]
        body = frame.astype(object).where(frame.notna(), None).to_numpy().tolist()
        locust.parts += [heading(run.name) if len(runs) > 1 else "", table(columns, body)]
    if locust.parts:
        locust.parts.append(
            note("Locust's response times are in ms, from its rounded buckets; LLM rows: one per request.")
        )
        sections.append(locust)
    return sections


def _chosen_rows(rows: pd.DataFrame, picks: dict[str, int | None]) -> pd.DataFrame:
    """Per run: the row of its capacity pick (run -> step index) or its highest output tok/s."""
    chosen = []
    for run, frame in rows.groupby("run", sort=False):
        if run in picks:
            match = frame[frame["step"].isna()] if picks[run] is None else frame[frame["step"] == picks[run]]
            chosen.append(match.iloc[0])
        else:
            chosen.append(frame.loc[frame["output_tokens_per_s"].idxmax()])
    return pd.DataFrame(chosen)


def _capacity_section(capacities: list[Capacity], runs: list[RunData], given: bool) -> Section:
    """The capacity pick of each run, its per-step check table (by load), and a capacity search's trials."""
    section = Section("Capacity under the SLOs")
    if not given:
        section.parts.append(
            note("SLOs: those the run was given (--slo of the run); pass --slo to the report for others.")
        )
    searches = {run.name: (run.summary or {}).get("search") for run in runs}
    for cap in capacities:
        slos = [result.slo for result in cap.checks[0].results]
        objectives = f"{', '.join(map(str, slos))} with at most {cap.max_error_rate:g} of requests failed"
        if cap.best is None:
            section.parts.append(paragraph(f"{cap.run}: no step meets every SLO ({objectives}).", "nopick"))
        else:
            best = cap.best
            unit = "req/s offered" if cap.load_title.startswith("Offered") else "users"
            load = "" if best.load is None else f" ({best.load:g} {unit})"
            section.parts.append(
                paragraph(
                    f"{cap.run}: capacity {best.label}{load}: {best.output_tokens_per_s:,.1f} output tok/s, "
                    f"{best.requests_per_s:,.2f} req/s, meeting {objectives}.",
                    "pick",
                )
            )
        if cap.above_failure:
            section.parts.append(
                paragraph(
                    f"{cap.run}: not monotone: {', '.join(c.label for c in cap.above_failure)} met every objective "
                    "although a step with less load failed; the capacity is the highest step below the first "
                    "failure (rerun, or lengthen the steps, to tell noise from a real recovery).",
                    "nopick",
                )
            )
        headers = [
            "step", cap.load_title, *(f"{s.name} (≤ {s.max_ms:g})" for s in slos),
            f"error rate (≤ {cap.max_error_rate:g})", "all met", "first failed", "output tok/s",
        ]  # fmt: skip
        body = [
            [c.label, c.load, *(r.value_ms for r in c.results), c.check.error_rate, c.ok,
             None if c.failure is None else str(c.failure), c.output_tokens_per_s]
            for c in cap.checks
        ]  # fmt: skip
        classes = [
            ["", "", *("ok" if r.ok else "fail" for r in c.results), _error_class(c), "ok" if c.ok else "fail", "", ""]
            for c in cap.checks
        ]
        section.parts.append(table(headers, body, classes))
        search = searches.get(cap.run)
        if search:
            section.parts += _search_parts(search)
    return section


def _error_class(check: CheckedStep) -> str:
    """The error-rate cell's class: "fail" above the limit."""
    error_rate = check.check.error_rate
    return "fail" if error_rate is None or error_rate > check.check.max_error_rate else "ok"


def _search_parts(search: dict) -> list[str]:
    """A capacity search's answer in one line, then every trial in the order run."""
    headers = ["trial", "offered req/s", "passed", "failed statistic", "value", "limit", "achieved req/s",
               "goodput req/s", "requests", "error rate"]  # fmt: skip
    body, classes = [], []
    for number, trial in enumerate(search["trials"], start=1):
        failed = trial["failed"] or {}
        body.append([number, trial["rate_per_s"], trial["passed"], failed.get("statistic"), failed.get("value"),
                     failed.get("limit"), trial["achieved_rate_per_s"], trial["goodput_per_s"], trial["requests"],
                     trial["error_rate"]])  # fmt: skip
        classes.append(["", "", "ok" if trial["passed"] else "fail", *[""] * 7])
    return [paragraph(search_line(search), "pick"), table(headers, body, classes)]
