"""summary.json, built by one pure function from a frozen view of the run (docs/results.md "summary.json").

The Locust side (`runtime.results_writer`) gathers what it knows into a `RunFacts` — plain values, no runner — and
`build_summary` turns it and the merged metrics into the document, verdict included (`metrics.gates.verdict`, a
pure function of the document without it). Nothing changes the document after it is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_locust import __version__
from llm_locust.apis import run_counting
from llm_locust.load.arrivals import StepSpan
from llm_locust.load.settings import LoadSettings
from llm_locust.metrics.client_error import ClientTiming, client_error
from llm_locust.metrics.gates import verdict
from llm_locust.metrics.intervals import Batches
from llm_locust.metrics.length_buckets import PROMPT_LENGTHS_APPROXIMATE, PROMPT_LENGTHS_EXACT
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.scoring import accuracy_stats
from llm_locust.metrics.settings import ObjectiveSettings
from llm_locust.metrics.slo import evaluate
from llm_locust.metrics.unfinished import Unfinished
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results import efficiency
from llm_locust.results.files import iso_time
from llm_locust.results.sections import (
    agent_sessions,
    backoff,
    breakdowns,
    connections,
    metric_stats,
    prefix_reuse,
    step_summary,
    throttling,
    throughput,
    token_accounting,
    token_warnings,
)
from llm_locust.results.settings import OutputSettings
from llm_locust.scrape.hardware import PowerSamples
from llm_locust.workload.settings import WorkloadSettings


@dataclass(frozen=True)
class ProcessHealth:
    """Master/local at the end of a run: each process's CPU/RSS statistics and the drift windows (`runtime.monitor`)."""

    processes: Mapping[str, Mapping[str, Any]]
    processes_file: str
    cpu_saturated: tuple[str, ...]  # processes short of CPU (`runtime.saturation.assess`)
    drift: Mapping[str, Any]


@dataclass(frozen=True)
class RunFacts:
    """What summary.json says about a run besides its metrics; epoch seconds unless a name says otherwise."""

    settings: Mapping[str, Any]  # as written to results (`config.settings.Settings.public`)
    load: LoadSettings
    workload: WorkloadSettings
    objectives: ObjectiveSettings
    output: OutputSettings
    locust_version: str
    host_shown: str | None  # redacted
    user_classes: tuple[str, ...]
    endpoints: tuple[str, ...]  # the APIs the user classes send to (`apis.APIS` keys)
    role: str  # "master" or "local"
    t_start_s: float
    t_end_s: float
    users_max: int
    workers_max: int
    workers_lost: tuple[str, ...]
    requests_by_worker: Mapping[str, int]
    unfinished: Unfinished  # requests the test's end cut (`metrics.unfinished`), in summary.json once final
    interrupted: bool
    interrupted_by: str | None  # the signal, when known
    locust_csv_prefix: str | None
    stop_reason: str | None
    spans: tuple[StepSpan, ...]
    diagnosis: tuple[str, str] | None  # (cause, one line) when nothing succeeded (`outcome.diagnose`) or finished
    # (`outcome.no_finish`); final only
    behind_schedule: str | None
    other_warnings: tuple[str, ...]  # client saturation, then the scraper's
    timeseries_file: str
    timeseries_rows: int
    client: Mapping[str, Any]  # saturation peaks (`runtime.saturation`)
    server: Mapping[str, Any] | None
    telemetry: Mapping[str, Any] | None
    health: ProcessHealth | None  # set on the final document only
    search: Mapping[str, Any] | None = None  # the capacity search (`load.search.RateSearch.as_dict`)
    trace: Mapping[str, Any] | None = None  # a trace replay: file, format, speedup, requests, replay_s, offered_file
    power: tuple[PowerSamples, ...] = ()  # per DCGM-exporter URL, its (epoch s, W) samples (`efficiency.energy`)
    requests_file: Mapping[str, Any] | None = None  # --requests-jsonl: file, lines, sample, dropped
    auth: Mapping[str, Any] | None = None  # OAuth bearer tokens: flow, refreshes_by_worker, refresh_failures
    clocks: Mapping[str, Any] | None = None  # a master's workers' clock offsets (`load.clock.offsets_summary`)
    queue_delay_by_worker: Mapping[str, Any] = field(default_factory=dict)  # open loop: each process's own, ms
    batches: Batches = field(default_factory=Batches)  # each closed window's quantiles, widening the intervals
    client_timing: ClientTiming | None = None  # the client's own timing: kernel receive times, loop lag


def build_summary(view: RunFacts, run: RunMetrics, final: bool = True) -> dict[str, Any]:
    """The summary.json document of `run` as seen by `view`.

    `final=False`: a snapshot taken while the test runs ("status": "incomplete"; no diagnosis, drift nor verdict
    yet). The final document is "incomplete" too when the run was interrupted or lost workers.
    """
    load, objectives = view.load, view.objectives
    duration_s = view.t_end_s - view.t_start_s
    warnings = []
    if view.interrupted:
        by = f" by {view.interrupted_by}" if view.interrupted_by else ""
        warnings.append(f"the run was interrupted{by} before the test ended: results hold what was measured until then")
    lost = sorted(view.workers_lost)
    if lost:
        warnings.append(
            f"{len(lost)} worker(s) stopped reporting during the run: {', '.join(lost)}; their last reported data "
            "is included"
        )
    diagnosis = view.diagnosis if final else None
    if diagnosis:
        warnings.append(diagnosis[1])
    elif run.total.requests_ok == 0:
        warnings.append("no request succeeded: latency statistics are empty")
    if view.behind_schedule:
        warnings.append(view.behind_schedule)
    warnings.extend(view.other_warnings)
    tokens = token_accounting(run.total)
    warnings.extend(token_warnings(tokens))
    complete = final and not view.interrupted and not lost
    stats = metric_stats(run.total, view.batches.of(None), intervals=final)  # a snapshot's: none (`metric_stats`)
    summary: dict[str, Any] = {
        "status": "complete" if complete else "incomplete",
        "llm_locust_version": __version__,
        "locust_version": view.locust_version,
        "run": {
            "host": view.host_shown,
            "user_classes": list(view.user_classes),
            "endpoints": list(view.endpoints),
            "counts": run_counting(view.endpoints).name,
            "role": view.role,
            "start_time": iso_time(view.t_start_s),
            "end_time": iso_time(view.t_end_s),
            "duration_s": round(duration_s, 3),
            "users_max": view.users_max,
            "workers_max": view.workers_max,
            "workers_lost": lost,
            "requests_by_worker": dict(sorted(view.requests_by_worker.items())),
            "queue_delay_ms_by_worker": dict(view.queue_delay_by_worker),
            "interrupted": (view.interrupted_by or "quit before the test ended") if view.interrupted else None,
            "locust_csv_prefix": view.locust_csv_prefix,
            "stop_reason": view.stop_reason,
        },
        "settings": dict(view.settings),
        "load": {
            "model": load.load_model,
            "rate_per_s": load.request_rate or None,
            "arrival": load.arrival if load.load_model.startswith("rate") else None,
            "burstiness": load.burstiness if load.arrival == "gamma" else None,
            "prompt_lengths": PROMPT_LENGTHS_EXACT if view.workload.tokenizer else PROMPT_LENGTHS_APPROXIMATE,
            "trace": None if view.trace is None else dict(view.trace),
        },
        "metrics": stats,
        "throughput": throughput(run.total, duration_s),
        "accuracy": accuracy_stats(run.total),
        "unfinished": view.unfinished.as_dict() if final else None,
        "slo": [r.as_dict() for r in evaluate(objectives.slo, stats)],
        "steps": [_step(view, span, run, final) for span in view.spans],
        "search": None if view.search is None else dict(view.search),
        "breakdowns": breakdowns(run, duration_s, view.spans, intervals=final),
        "failures": dict(run.total.failures),
        "throttling": throttling(run.total, duration_s),
        "backoff": backoff(run.total),
        "diagnosis": diagnosis[1] if diagnosis else None,
        "tokens": tokens,
        "prefix_reuse": prefix_reuse(run.total),
        "connections": connections(run.total),
        "agent": agent_sessions(run.total),
        "timeseries": {
            "file": view.timeseries_file,
            "interval_s": view.output.interval_s,
            "rows": view.timeseries_rows,
        },
        "requests_file": None if view.requests_file is None else dict(view.requests_file),
        "auth": None if view.auth is None else dict(view.auth),
        "clocks": None if view.clocks is None else dict(view.clocks),
        "client": _client(view),
        "client_error": None
        if view.client_timing is None
        else client_error(run.total, view.client_timing, objectives.max_client_error_ms),
        "server": view.server,
        "telemetry": view.telemetry,
        **_efficiency(view, run.total, view.t_start_s, view.t_end_s),
        "warnings": warnings,
    }
    if view.health is not None:
        summary["drift"] = dict(view.health.drift)
        summary["verdict"] = verdict(
            summary, objectives.slo, objectives.max_error_rate, objectives.max_drift_pct, objectives.min_accuracy
        )
    return summary


def _step(view: RunFacts, span: StepSpan, run: RunMetrics, final: bool) -> dict[str, Any]:
    """One `steps[]` entry: `sections.step_summary` (its intervals only in the `final` summary) and the energy and cost
    of its measurement window."""
    index = span.step.index
    window = run.step_windows.measured(index)
    steady = run.step_windows.to_summary(index, span.start_s)
    entry = step_summary(span, window, run.warmup_requests[index], steady, view.batches.of(index), intervals=final)
    return {
        **entry,
        **_efficiency(view, window or WindowMetrics(), span.measure_from_s, span.measure_from_s + span.measure_s),
    }


def batch_scopes(start_s: float, interval_s: float, spans: Sequence[StepSpan]) -> tuple[int | None, ...]:
    """What the time window from `start_s` (epoch s, `interval_s` long) is a batch of (`intervals.Batches`): the run
    (None), and the sweep step whose measurement window holds it whole."""
    end_s = start_s + interval_s
    for span in spans:
        if span.measure_from_s <= start_s and end_s <= (span.end_s or float("inf")):
            return None, span.step.index
    return (None,)


def _efficiency(view: RunFacts, window: WindowMetrics, start_s: float, end_s: float) -> dict[str, Any]:
    """`energy` and `cost` (`results.efficiency`) of `window`'s requests over `start_s`..`end_s` (epoch s)."""
    return {
        "energy": efficiency.energy(view.power, start_s, end_s, window.output_tokens, window.requests_ok),
        "cost": efficiency.cost(view.output.cost_per_hour, end_s - start_s, window.output_tokens, window.prompt_tokens),
    }


def _client(view: RunFacts) -> dict[str, Any]:
    """summary.json's "client": the saturation peaks, plus each process's CPU/RSS once the run is over."""
    client = {key: dict(value) if isinstance(value, Mapping) else value for key, value in view.client.items()}
    health = view.health
    if health is None:
        return client
    processes = client.setdefault("processes", {})
    for name, stats in health.processes.items():
        processes[name] = {**processes.get(name, {}), **stats}
    client.update(processes_file=health.processes_file, cpu_saturated=list(health.cpu_saturated))
    return client
