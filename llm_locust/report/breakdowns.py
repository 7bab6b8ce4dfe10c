"""The report's "Breakdowns" section: summary.json's `breakdowns` (per replica, per prompt-length bucket, ...) as
one table per run and dimension."""

from __future__ import annotations

from typing import Any

from llm_locust.report.html import Section, heading, table
from llm_locust.report.run_data import RunData
from llm_locust.report.tables import interval_cell

COLUMNS = (
    ("requests_ok", "ok"), ("requests_failed", "failed"), ("requests_cancelled", "cancelled"),
    ("ttft_ms.p50", "TTFT p50 ms"), ("ttft_ms.p90", "TTFT p90 ms"), ("ttft_ms.p99", "TTFT p99 ms"),
    ("tpot_ms.p50", "TPOT p50 ms"), ("tpot_ms.p90", "TPOT p90 ms"), ("e2e_ms.p50", "E2E p50 ms"),
    ("e2e_ms.p90", "E2E p90 ms"), ("output_tokens_per_s", "output tok/s"), ("failures", "failures"),
)  # fmt: skip
"""What each row shows: a key of the entry, `metric.statistic` of its metrics, or a key of its throughput."""


ACCURACY_COLUMNS = (("accuracy", "accuracy"), ("ci95_low", "accuracy CI low"), ("ci95_high", "accuracy CI high"),
                    ("scored", "answers scored"))  # fmt: skip
"""With scored answers: the keys of an entry's `accuracy` shown (its Wilson 95 % interval), after `COLUMNS`."""


def breakdown_rows(entries: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of one dimension's entries (summary.json order); a step column only inside sweeps; the
    accuracy columns when an entry has scored answers."""
    stepped = any(entry.get("step") is not None for entry in entries)
    scored = any(entry.get("accuracy") for entry in entries)
    headers = [*(("step",) if stepped else ()), "label", *(title for _, title in COLUMNS)]
    headers += [title for _, title in ACCURACY_COLUMNS] if scored else []
    rows = []
    for entry in entries:
        row: list[Any] = [entry.get("step")] if stepped else []
        row.append(entry["label"])
        for key, _ in COLUMNS:
            metric, _, stat = key.partition(".")
            if stat:  # a percentile with its 95 % interval, as in the Steps table
                stats = entry.get("metrics", {}).get(metric) or {}
                value = interval_cell(stats.get(stat), stats.get(f"{stat}_ci95"))
            elif key == "failures":
                value = ", ".join(f"{kind} {n}" for kind, n in sorted(entry.get("failures", {}).items())) or None
            else:
                value = entry.get(key, entry.get("throughput", {}).get(key))
            row.append(value)
        if scored:
            row += [(entry.get("accuracy") or {}).get(key) for key, _ in ACCURACY_COLUMNS]
        rows.append(row)
    return headers, rows


def breakdown_section(runs: list[RunData]) -> Section | None:
    """One table per run and dimension of its summary's breakdowns; None when no run has any."""
    section = Section("Breakdowns")
    for run in runs:
        for dimension, entries in ((run.summary or {}).get("breakdowns") or {}).items():
            if entries:
                title = f"{run.name}: by {dimension}" if len(runs) > 1 else f"by {dimension}"
                section.parts += [heading(title), table(*breakdown_rows(entries))]
    return section if section.parts else None
