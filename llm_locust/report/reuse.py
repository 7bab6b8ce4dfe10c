"""Prefix reuse in the report: the client's expected reuse and TTFT split by reuse bucket (summary.json's
`prefix_reuse` and `breakdowns.reuse`), for runs that sent shared prompt blocks (--prefix-tokens, traces)."""

from __future__ import annotations

from typing import Any

from llm_locust.report.html import Section, note, table
from llm_locust.report.run_data import RunData

_TTFT_STATS = ("p50", "p90", "mean")


def reuse_rows(run: RunData) -> list[list[Any]]:
    """One row per reuse bucket of `run` (per sweep step in sweeps): step (None outside sweeps), label, successful
    requests, their share of the step's, TTFT p50 / p90 / mean (ms)."""
    rows = ((run.summary or {}).get("breakdowns") or {}).get("reuse") or []
    totals: dict[Any, int] = {}
    for row in rows:
        totals[row.get("step")] = totals.get(row.get("step"), 0) + row["requests_ok"]
    body = []
    for row in rows:
        ttft = (row.get("metrics") or {}).get("ttft_ms") or {}
        total = totals[row.get("step")]
        share = row["requests_ok"] / total if total else None
        body.append([row.get("step"), row["label"], row["requests_ok"], share, *(ttft.get(s) for s in _TTFT_STATS)])
    return body


def reuse_section(runs: list[RunData]) -> Section | None:
    """The "Prefix reuse" section: per run its expected reuse and TTFT by reuse bucket; None when no run has any."""
    section = Section("Prefix reuse")
    for run in runs:
        reuse = (run.summary or {}).get("prefix_reuse") or {}
        body = reuse_rows(run)
        if not reuse.get("blocks") or not body:
            continue
        section.parts += [
            note(
                f"{run.name}: expected reuse {reuse['expected_reuse']:.1%} ({reuse['blocks_seen']} of "
                f"{reuse['blocks']} shared 512-token blocks sent before)"
            ),
            table(["step", "reuse", "requests ok", "share", *(f"TTFT {stat} ms" for stat in _TTFT_STATS)], body),
        ]
    if not section.parts:
        return None
    section.parts.append(
        note(
            "Requests by the share of their whole 512-token prompt blocks an earlier request had sent: a server "
            "with a prefix cache skips their prefill, so TTFT falls as reuse rises. The server's own hit rate, "
            "when scraped, is in the server's table."
        )
    )
    return section
