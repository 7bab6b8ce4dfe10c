"""Agent sessions in the report: per run its sessions (summary.json's `agent`), steps and tool calls per session, the
session's duration and how it splits between waiting for the model and time in tools (the `agent_*` metrics).
TTFT per step is the "agent_step" table of the Breakdowns section (`breakdowns.py`)."""

from __future__ import annotations

from typing import Any

from llm_locust.report.html import Section, note, table
from llm_locust.report.run_data import RunData

HEADERS = ["run", "sessions", "failed", "tool calls", "steps mean", "steps max", "tool calls mean",
           "duration p50 ms", "duration p90 ms", "model mean ms", "tools mean ms", "model share",
           "time to tool call p50 ms"]  # fmt: skip


def agent_row(run: RunData) -> list[Any] | None:
    """`run`'s row (see `HEADERS`; model share: mean model time / mean session duration, 0..1; the time to the
    complete tool call of the answers that made one); None when it played no agent session."""
    summary = run.summary or {}
    agent = summary.get("agent")
    if not agent:
        return None
    metrics = summary.get("metrics") or {}

    def stat(metric: str, key: str) -> Any:
        return (metrics.get(metric) or {}).get(key)

    duration, model = stat("agent_session_ms", "mean"), stat("agent_model_ms", "mean")
    share = round(model / duration, 3) if duration and model is not None else None
    return [run.name, agent["sessions"], agent["sessions_failed"], agent["tool_calls"], stat("agent_steps", "mean"),
            stat("agent_steps", "max"), stat("agent_tool_calls", "mean"), stat("agent_session_ms", "p50"),
            stat("agent_session_ms", "p90"), model, stat("agent_tool_ms", "mean"), share,
            stat("tool_call_ms", "p50")]  # fmt: skip


def agent_section(runs: list[RunData]) -> Section | None:
    """The "Agent sessions" section; None when no run played agent sessions."""
    body = [row for row in map(agent_row, runs) if row is not None]
    if not body:
        return None
    return Section(
        "Agent sessions",
        [
            table(HEADERS, body),
            note(
                "A session is a user prompt and its steps: one request per answer that called tools, until an answer "
                "without a tool call or --max-agent-steps. Its duration (first request sent to last stream end) is "
                "the time waiting for the model (each step's request to its stream's end) plus the time in tools "
                "(each step's end to the next step's request: the tools' latency and the client's time between); "
                "statistics of the sessions whose every step succeeded. Time to tool call: from a step's request to "
                "the arrival of its tool call's last part. TTFT per step: the Breakdowns section, by agent_step."
            ),
        ],
    )
