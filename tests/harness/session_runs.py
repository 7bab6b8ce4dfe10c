"""A run of sessions over a WebSocket (the Realtime APIs' locustfiles) through the `locust` CLI, master + 2 worker
processes, against a simulator, checked against its trace: what both Realtime API run tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import read_summary, run_locust

from harness.trace_agreement import request_lines

USERS = 6
"""Users of the run: each may have one turn cut by the stop."""


def sessions_through_workers(
    locustfile: Path, url: str, trace_of: Any, endpoint: str, results: Path, requests: int, trust: tuple[str, ...]
) -> tuple[dict, list[dict], dict[str, dict]]:
    """Run `locustfile`'s sessions against the simulator at `url` until `requests` arrivals (`--max-requests`), then
    hold the run to the simulator's trace (`trace_of()`, its `endpoint` requests): 0 failures, every reported turn
    one the simulator answered — the stop cuts at most one turn per user, answered by the simulator and reported by
    nobody —, the tokens it counted. Returns the summary, requests.jsonl's lines and the answered turns by id."""
    proc = run_locust(locustfile, "--host", url, "--model", "llm-locust-sim", "-u", str(USERS), "-r", str(USERS),
                      "-t", "60s", "--processes", "2", "--max-requests", str(requests), "--requests-jsonl",
                      "--results-dir", str(results), *trust)  # fmt: skip
    trace = [r for r in trace_of() if r["endpoint"] == endpoint]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(results)
    t = summary["throughput"]
    lines = request_lines(results)
    reported = {line["request_id"] for line in lines}
    served = {r["id"]: r for r in trace if r["id"] in reported}
    assert len(served) == len(lines) and len(trace) - len(served) <= USERS
    assert summary["failures"] == {} and t["requests_ok"] == len(served) >= requests
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert t["output_tokens"] == sum(r["completion_tokens"] for r in served.values())
    assert t["prompt_tokens"] == sum(r["prompt_tokens"] for r in served.values())
    return summary, lines, served
