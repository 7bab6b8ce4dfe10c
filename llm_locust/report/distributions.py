"""Distribution figures: histogram and CDF of TTFT, TPOT, ITL, E2E and output tokens per request.

From histograms.json (HdrHistograms: every request's value within 0.1 %) when the folder has
it; otherwise the CDF is drawn through the summary's percentiles (min, p50 .. p99.9, max) and
no histogram can be drawn.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from hdrh.histogram import HdrHistogram
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from llm_locust.metrics.declarations import latencies, names, pick
from llm_locust.report.figure import Chart, finish, latency_title, run_color
from llm_locust.report.run_data import RunData

HISTOGRAM_BINS = 60
MAX_CDF_POINTS = 1000
_PERCENTILE_POINTS = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p99_9", 0.999),
                      ("max", 1.0))  # fmt: skip


def _title(metric: str) -> str:
    """Axis title of `metric` with its unit."""
    return "output tokens per request" if metric == "output_tokens" else f"{latency_title(metric)} (ms)"


def cdf_points(hist: HdrHistogram, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(values, cumulative fraction 0..1) at each non-empty bucket of `hist`.

    A bucket's value is its highest equivalent value divided by `scale` (1000: µs -> ms), as the
    summary's percentiles are: the CDF first reaches 0.9 at the summary's p90.
    """
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    indices = np.flatnonzero(counts)
    highest = hist.get_max_value()
    values = np.array(
        [min(hist.get_highest_equivalent_value(hist.get_value_from_index(int(i))), highest) for i in indices],
        dtype=float,
    )
    cumulative = np.cumsum(counts[indices]) / hist.get_total_count()
    return values / scale, cumulative


def thin_cdf(values: np.ndarray, cumulative: np.ndarray, hist: HdrHistogram) -> tuple[np.ndarray, np.ndarray]:
    """At most ~MAX_CDF_POINTS of `hist`'s CDF (`cdf_points`): the bucket where each percentile 0.1, 0.2 .. 100 lies
    by HdrHistogram's own rule (`get_target_count_at_percentile`, as `metrics.hdr.quantiles` finds the summary's), and
    the last — so the summary's p50, p90, p99 and p99.9 are points of it. (Keeping where the fraction crossed a multiple
    of 0.001 lost a percentile whose target count rounded down into the band of the bucket before: a p99 of 4,278
    values at sample 4,235, 0.98995.)"""
    if len(values) <= MAX_CDF_POINTS:
        return values, cumulative
    counts = np.rint(cumulative * hist.get_total_count()).astype(np.int64)
    targets = [hist.get_target_count_at_percentile(k / 10) for k in range(1, 1001)]
    keep = np.union1d(np.searchsorted(counts, targets, side="left"), [len(values) - 1])
    return values[keep], cumulative[keep]


def _has_queue_delay(run: RunData) -> bool:
    """True when `run` measured client queue delay (an open-loop run)."""
    hist = ((run.histograms or {}).get("run") or {}).get("queue_delay")
    stats = ((run.summary or {}).get("metrics") or {}).get("queue_delay_ms") or {}
    return bool((hist is not None and hist.get_total_count()) or stats.get("count"))


def histogram_bins(values: np.ndarray, cumulative: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bin centres, share of samples %) over HISTOGRAM_BINS equal bins from the CDF points."""
    weights = np.diff(cumulative, prepend=0.0)
    shares, edges = np.histogram(values, bins=HISTOGRAM_BINS, weights=weights)
    return (edges[:-1] + edges[1:]) / 2, 100.0 * shares


def distributions(runs: list[RunData]) -> Chart | None:
    """Histogram (left) and CDF (right) per metric, runs overlaid."""
    if not any(run.summary is not None for run in runs):
        return None
    kinds = ("histogram", "CDF") if any(run.histograms for run in runs) else ("CDF",)
    cdf_col = len(kinds)
    metrics = (*names(latencies(series=True)), "output_tokens")  # every latency of the time series
    metrics += ("queue_delay",) if any(_has_queue_delay(run) for run in runs) else ()
    figure = make_subplots(
        rows=len(metrics), cols=len(kinds), vertical_spacing=0.3 / len(metrics), horizontal_spacing=0.08,
        subplot_titles=[f"{_title(m)} {kind}" for m in metrics for kind in kinds],
    )  # fmt: skip
    summary_only = []
    for i, run in enumerate(runs):
        if run.summary is None:
            continue
        hists = (run.histograms or {}).get("run", {})
        for row, metric in enumerate(metrics, start=1):
            color = run_color(i)
            meta = {"run": run.name, "metric": metric}
            hist = hists.get(metric)
            if hist is not None and hist.get_total_count():
                values, cumulative = cdf_points(hist, 1.0 if metric == "output_tokens" else 1000.0)
                centres, shares = histogram_bins(values, cumulative)
                values, cumulative = thin_cdf(values, cumulative, hist)
                figure.add_trace(
                    go.Scatter(
                        x=centres, y=shares, mode="lines", line={"color": color, "shape": "hvh"}, name=run.name,
                        legendgroup=run.name, showlegend=row == 1, meta={**meta, "kind": "histogram"},
                        hovertemplate="%{x:.4g}: %{y:.3g} %<extra>" + run.name + "</extra>",
                    ),
                    row=row, col=1,
                )  # fmt: skip
                mode, dash = ("lines" if len(values) >= 20 else "lines+markers"), None
            else:
                stats = run.summary["metrics"].get("output_tokens" if metric == "output_tokens" else f"{metric}_ms")
                if not stats or not stats.get("count"):
                    continue
                points = [(stats[key], q) for key, q in _PERCENTILE_POINTS if stats.get(key) is not None]
                values, cumulative = np.array([p[0] for p in points]), np.array([p[1] for p in points])
                mode, dash = "lines+markers", "dash"
                if run.name not in summary_only:
                    summary_only.append(run.name)
            figure.add_trace(
                go.Scatter(
                    x=values, y=cumulative, mode=mode, line={"color": color, "dash": dash}, name=f"{run.name} CDF",
                    legendgroup=run.name, showlegend=False, meta={**meta, "kind": "cdf"},
                    hovertemplate="%{x:.4g}: %{y:.4f}<extra>" + run.name + "</extra>",
                ),
                row=row, col=cdf_col,
            )  # fmt: skip
    for row, metric in enumerate(metrics, start=1):
        figure.update_xaxes(title_text=_title(metric), row=row)
        if cdf_col == 2:
            figure.update_yaxes(title_text="% of samples", row=row, col=1)
        figure.update_yaxes(title_text="fraction ≤ x", range=[0, 1.02], row=row, col=cdf_col)
    note = (
        f" No histograms.json for {', '.join(summary_only)}: its CDF is drawn through the summary's "
        "percentiles (dashed, markers) and it has no histogram."
        if summary_only
        else ""
    )
    return Chart(
        "distributions",
        "Distributions",
        "Whole run, successful requests only; ITL pools every gap between token events; client queue delay "
        "(open loop: how late each request left after its scheduled time) when the run had one." + note,
        finish(figure, 320 * len(metrics), "Distributions"),
    )


STEP_METRICS = names(pick("ttft", "tpot", "e2e"))


def step_distributions(runs: list[RunData]) -> Chart | None:
    """CDF of TTFT, TPOT and E2E per step (one row per run with steps and histograms.json):
    how the whole distribution moves as load grows (queueing shows as a second mode in TTFT)."""
    swept = [run for run in runs if run.steps and run.histograms and len(run.histograms) > 1]
    if not swept:
        return None
    titles = [f"{run.name}: {latency_title(m)} (ms)" for run in swept for m in STEP_METRICS]
    figure = make_subplots(rows=len(swept), cols=len(STEP_METRICS), subplot_titles=titles,
                           vertical_spacing=0.12 / len(swept), horizontal_spacing=0.06)  # fmt: skip
    for row, run in enumerate(swept, start=1):
        colors = sample_colorscale("Viridis", [i / max(len(run.steps) - 1, 1) * 0.9 for i in range(len(run.steps))])
        for n, step in enumerate(run.steps):
            index = str(step.get("index", n))
            label = step.get("label") or f"step {index}"
            for col, metric in enumerate(STEP_METRICS, start=1):
                hist = run.histograms.get(index, {}).get(metric)
                if hist is None or not hist.get_total_count():
                    continue
                values, cumulative = thin_cdf(*cdf_points(hist, 1000.0), hist)
                figure.add_trace(
                    go.Scatter(
                        x=values, y=cumulative, mode="lines", line={"color": colors[n]}, name=label,
                        legendgroup=f"{run.name} {label}", showlegend=col == 1 and row == 1,
                        meta={"run": run.name, "step": label, "metric": metric, "kind": "cdf"},
                        hovertemplate="%{x:.4g} ms: %{y:.4f}<extra>" + f"{run.name} {label}" + "</extra>",
                    ),
                    row=row, col=col,
                )  # fmt: skip
        figure.update_yaxes(title_text="fraction ≤ x", range=[0, 1.02], row=row, col=1)
    return Chart(
        "step_distributions",
        "Distributions per step",
        "CDF of each step's requests (after its warm-up), from histograms.json; darker = less load.",
        finish(figure, 380 * len(swept) + 60, "Distributions per step"),
    )
