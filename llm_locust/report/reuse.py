"""Prefix reuse in the report: per run the client's expected reuse (summary.json's `prefix_reuse`) beside the
server's prefix-cache hit rate when scraped, for runs that sent shared prompt blocks (--prefix-tokens, traces).
TTFT per reuse bucket is the "reuse" table of the Breakdowns section (`breakdowns.py`)."""

from __future__ import annotations

from typing import Any

from llm_locust.report.html import Section, note, table
from llm_locust.report.run_data import RunData


def reuse_row(run: RunData) -> list[Any] | None:
    """`run`'s row: blocks sent, of which seen before, expected reuse (0..1), the server's hit rate (0..1, the first
    metrics URL that exports one, else None); None when it sent no shared block."""
    summary = run.summary or {}
    reuse = summary.get("prefix_reuse") or {}
    if not reuse.get("blocks"):
        return None
    urls = (summary.get("server") or {}).get("urls") or []
    hit_rate = next((u["prefix_cache_hit_rate"] for u in urls if u.get("prefix_cache_hit_rate") is not None), None)
    return [run.name, reuse["blocks"], reuse["blocks_seen"], reuse["expected_reuse"], hit_rate]


def reuse_section(runs: list[RunData]) -> Section | None:
    """The "Prefix reuse" section; None when no run sent shared prompt blocks."""
    body = [row for row in map(reuse_row, runs) if row is not None]
    if not body:
        return None
    headers = ["run", "shared blocks sent", "seen before", "expected reuse", "server prefix-cache hit rate"]
    return Section(
        "Prefix reuse",
        [
            table(headers, body),
            note(
                "Expected reuse: the share of the whole 512-token prompt blocks an earlier request had sent, what a "
                "prefix cache of unbounded capacity would hit (each worker process counts its own). The server's "
                "hit rate is hit / looked-up prompt tokens (its own prompt tokens included), when scraped. TTFT per "
                "reuse bucket: the Breakdowns section, by reuse."
            ),
        ],
    )
