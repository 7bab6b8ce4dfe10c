"""Pass/fail gates for scheduled runs: the verdict of a run, from its summary.

    --slo ttft_p99_ms=2000     every objective met by the run's distribution (llm_locust.metrics.slo)
    --max-error-rate 0.01      failed / (successful + failed) at most 1 % (the option's default: a run where most
                               requests failed never passes; 1 turns it off)
    --max-drift-pct 20         no TTFT/TPOT percentile rose, no throughput fell, by more than 20 %
                               between the early and late windows (llm_locust.metrics.drift)
    --min-accuracy 0.9         the run's accuracy (summary.json `accuracy`, llm_locust.metrics.scoring) is at
                               least 0.9; a run that scored no answer fails it

A capacity search (summary.json `search`) is judged by its answer instead of the first two: its trials above the
capacity fail the objectives by design; the run fails when no trial passed them.

And always: the run was not interrupted (SIGTERM / SIGINT: `EXIT_INTERRUPTED`), some request
succeeded, no worker was lost, no load-generating process was short of CPU (`runtime.saturation`: 90 % of a
core or more, sustained, with event-loop lag), and the client cannot have moved ITL p99 by more than
--max-client-error-ms (summary.json `client_error`, `metrics.client_error`: else the run is client_limited). A failed
verdict makes the run exit with `EXIT_GATE_FAILED` (`EXIT_INTERRUPTED` when interrupted: partial results say nothing
about the gates; else `EXIT_CLIENT_LIMITED` when the client was limited: the other gates judged the client's error
too); the verdict is written into summary.json under "verdict".

Pure: imports neither Locust nor anything that does; `verdict` reads a summary dict, so a
results folder can be judged again offline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llm_locust.metrics.client_error import limited_reason
from llm_locust.metrics.drift import worst
from llm_locust.metrics.slo import Slo, evaluate

EXIT_GATE_FAILED = 3
"""Exit code of a run whose verdict failed (1: nothing succeeded for a reason outside the command, 2 a configuration
error)."""
EXIT_INTERRUPTED = 4
"""Exit code of a run stopped by SIGTERM or SIGINT (Ctrl-C) before its end."""
EXIT_CLIENT_LIMITED = 5
"""Exit code of a client_limited run: the client can have moved ITL p99 by more than --max-client-error-ms."""


def verdict(
    summary: Mapping[str, Any],
    slos: Iterable[Slo] = (),
    max_error_rate: float | None = None,
    max_drift_pct: float | None = None,
    min_accuracy: float | None = None,
) -> dict[str, Any]:
    """The verdict of a run from its summary.json document (`metrics`, `throughput`, `run`, `drift`, `client`,
    `accuracy`).

    Returns `{"passed", "reasons", "slo", "error_rate", "max_error_rate", "max_drift_pct", "accuracy",
    "min_accuracy", "client_limited", "exit_code"}` (`accuracy`: the run's, None when no answer was scored):
    each reason is one sentence naming the gate, the measured value and the limit (a run without any success says
    only that, not its error rate too). `max_error_rate` None: no error-rate gate (the settings always give one).
    """
    reasons: list[str] = []
    interrupted = summary["run"].get("interrupted")
    if interrupted:
        reasons.append(f"interrupted: {interrupted}" if " " in interrupted else f"interrupted by {interrupted}")
    throughput = summary["throughput"]
    ok, failed = throughput["requests_ok"], throughput["requests_failed"]
    attempted = ok + failed
    error_rate = failed / attempted if attempted else None
    if ok == 0:
        reasons.append("no request succeeded")
    search = summary.get("search")
    if search is not None:  # the objectives are the search's, trial by trial
        slos, max_error_rate = (), None
        if search["max_rate_per_s"] is None and ok:
            reasons.append(f"capacity search: no trial met every objective ({search['stopped'] or 'not finished'})")
    if ok and max_error_rate is not None and error_rate is not None and error_rate > max_error_rate:
        reasons.append(
            f"error rate {error_rate:.4f} ({failed} of {attempted} requests) > --max-error-rate {max_error_rate:g}"
        )

    slo_results = evaluate(slos, summary["metrics"])
    for result in slo_results:
        if not result.ok:
            measured = "no data" if result.value_ms is None else f"{result.value_ms:g} ms"
            reasons.append(f"SLO {result.slo} not met: {measured}")

    accuracy = summary.get("accuracy")
    if min_accuracy is not None:
        if not accuracy:
            reasons.append(f"--min-accuracy {min_accuracy:g} set but no answer was scored")
        elif accuracy["accuracy"] < min_accuracy:
            reasons.append(
                f"accuracy {accuracy['accuracy']:.4f} ({accuracy['correct']} of {accuracy['scored']} scored answers "
                f"right, 95 % CI {accuracy['ci95_low']:.3f}-{accuracy['ci95_high']:.3f}) < --min-accuracy "
                f"{min_accuracy:g}"
            )

    drift = summary.get("drift") or {}
    if max_drift_pct is not None:
        if not drift.get("evaluated"):
            reasons.append(f"--max-drift-pct set but no drift computed: {drift.get('reason', 'no drift data')}")
        else:
            worst_drift = worst(drift["metrics"])
            if worst_drift is not None and worst_drift[1] > max_drift_pct:
                key, pct = worst_drift
                m = drift["metrics"][key]
                reasons.append(
                    f"drift: {key} {pct:+.1f} % worse (early {m['early']:g}, late {m['late']:g})"
                    f" > --max-drift-pct {max_drift_pct:g}"
                )

    lost = summary["run"].get("workers_lost") or []
    if lost:
        reasons.append(f"worker lost: {len(lost)} worker(s) stopped reporting ({', '.join(lost)})")
    saturated = (summary.get("client") or {}).get("cpu_saturated") or []
    if saturated:
        reasons.append(
            f"client saturated: {', '.join(saturated)} short of CPU (sustained CPU near one core, with event-loop "
            "lag; measurements unreliable; add workers)"
        )
    client_limited = limited_reason(summary.get("client_error") or {})
    if client_limited:
        reasons.append(client_limited)
    passed = not reasons
    return {
        "passed": passed,
        "reasons": reasons,
        "slo": [r.as_dict() for r in slo_results],
        "error_rate": None if error_rate is None else round(error_rate, 6),
        "max_error_rate": max_error_rate,
        "max_drift_pct": max_drift_pct,
        "accuracy": accuracy["accuracy"] if accuracy else None,
        "min_accuracy": min_accuracy,
        "client_limited": client_limited is not None,
        "exit_code": exit_code(passed, bool(interrupted), client_limited is not None),
    }


def exit_code(passed: bool, interrupted: bool, client_limited: bool) -> int:
    """The verdict's exit code: 0 passed; else `EXIT_INTERRUPTED`, `EXIT_CLIENT_LIMITED`, `EXIT_GATE_FAILED`, the
    first that applies."""
    if passed:
        return 0
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_CLIENT_LIMITED if client_limited else EXIT_GATE_FAILED
