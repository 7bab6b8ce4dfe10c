"""Agent sessions (`locustfiles/agent.py`): a user prompt, then steps, each answer's tool calls run and sent back.

A session starts as a one-turn `sessions.Session` (a user message of `--prompt-tokens`, the requests carrying the
run's tools). Each request is a step; when its answer holds tool calls (`RequestRecord.tool_calls`), the tools "run"
(`--tool-latency-ms`, the wait is the user's), and the next step sends the whole history plus the assistant's answer
with its calls and a result of `--tool-result-tokens` per call, each in the API's own form (`apis.shapes.ToolForms`:
chat `tool_calls` + `role: "tool"`, Responses `function_call` + `function_call_output`, Messages `tool_use` +
`tool_result`). The session ends with an answer without a tool call, at `--max-agent-steps`, or with a failed step.

`AgentSession.finished` sees each finished step before it is reported (`builder.Workload.answered`): it
puts the step in the "agent_step" breakdown and, on the session's last request, the session's figures
(`record.AgentSummary`). Pure: no I/O, no clock of its own (the records' times).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_locust.metrics.record import AgentSummary, RequestRecord, ToolCall, agent_step_group
from llm_locust.workload.sessions import Session


@dataclass(slots=True)
class AgentSession:
    """One agent session's progress: its `conversation`, the steps finished, the tool calls made, its times so far
    (perf_counter s); `pending`, the last answer's tool calls when the session goes on (else empty), until their
    results are sent back; then `ready`: the next step is to be sent (after the tools' time), whose history up to the
    last answer counted `seen_tokens`."""

    conversation: Session
    max_steps: int
    steps: int = 0
    tool_calls: int = 0
    t_start: float | None = None  # the first step's t_send
    t_end: float = 0.0  # the last step's stream end
    model_s: float = 0.0
    tool_s: float = 0.0
    pending: tuple[ToolCall, ...] = ()
    ready: bool = False
    seen_tokens: int = 0

    def finished(self, record: RequestRecord) -> None:
        """A step finished (`record`, before it is reported): count it, put it in the "agent_step" breakdown, decide
        whether the session goes on (a successful answer with a tool call, fewer than `max_steps` steps), and if not
        put the session's figures on `record` (`record.agent`)."""
        self.steps += 1
        t_end = record.t_done if record.t_done is not None else record.t_send
        if self.t_start is None:
            self.t_start = record.t_send
        else:
            self.tool_s += record.t_send - self.t_end
        self.model_s += t_end - record.t_send
        self.t_end = t_end
        self.tool_calls += len(record.tool_calls)
        record.groups += (agent_step_group(self.steps),)
        goes_on = record.ok and bool(record.tool_calls) and self.steps < self.max_steps
        self.pending = record.tool_calls if goes_on else ()
        if not goes_on:
            record.agent = AgentSummary(self.steps, self.tool_calls, t_end - self.t_start, self.model_s, self.tool_s,
                                        record.ok)  # fmt: skip

    def send_back(self, messages: list[dict[str, Any]], tokens: int) -> None:
        """The pending tool calls ran: their history `messages` (the API's form of the answer and the results,
        `tokens` prompt tokens in all) join the conversation; the next step is `ready`."""
        self.seen_tokens = self.conversation.history_tokens
        for index, message in enumerate(messages):
            self.conversation.add(message, tokens if index == 0 else 0)
        self.pending, self.ready = (), True


def answer_content(record: RequestRecord) -> str:
    """The text of an answer with tool calls, as the assistant's message content: the kept answer text
    (`answer_text`, which the API's event text gives with the calls' names and arguments in it) without its tool
    calls' text."""
    text = record.answer_text or ""
    for call in record.tool_calls:
        for piece in (call.name + call.arguments, call.arguments):
            at = text.rfind(piece) if piece else -1
            if at >= 0:
                text = text[:at] + text[at + len(piece) :]
                break
    return text.strip()
