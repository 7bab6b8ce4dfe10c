"""Ground-truth records of finished requests, as served by GET /sim/trace.

One `TraceRecord` per request, with what was actually written and when (perf_counter seconds,
CLOCK_MONOTONIC on Linux, so comparable with a client's perf_counter on the same machine):

- `t_recv`: the request's first byte arrived (the kernel's receive time of the read that brought it: where a server's
  clock starts); `t_body`: its last byte (the read that completed it); `parse_s`: seconds spent decoding its body
  before it could start;
- `token_times`: for a streamed response, the instant right before each token event was handed
  to the socket (events written together share an instant; the bytes cannot reach a client
  earlier — stamped after the write, a client on another core could read them first); for a
  non-streamed response, when the timing model produced each token (only the last coincides
  with a write);
- `t_head`: right before the response head was handed to the socket (a streamed response's when its answer starts, a
  whole body's with it; None when no answer started: a fault's response, a request cut before its start);
- `t_done`: the end of the response was written (or the client went away);
- `queue_s`: seconds waiting for a batch slot (batching model; 0 for the fixed model);
- `cancelled`: the client disconnected before the end; `completion_tokens` then counts what was
  produced and `finish_reason` is None;
- `prefix_blocks`, `prefix_blocks_hit`: whole 512-token blocks of the prompt and, of those, the leading ones the
  prefix cache held (`llm_locust.sim.prefix_cache`; both 0 without a cache);
- `session`: the value of the `--session-header` request header, else None;
- `model`: the served model the request named (`--models`: the base or one of its adapters);
- `accept_delay_s`: seconds the connection it came on was left unread after its accept (`--accept-delay-ms`, as
  served: the timer wakes a little late), on the connection's first request; 0 on the others and without the option;
- `lora_wait_s`: seconds its prefill waited for its LoRA adapter to be loaded (`--max-loras`; 0 when resident);
- `fault`: the fault injected into this response (`llm_locust.sim.faults` kinds), else None; a
  response ended early by its fault has `finish_reason` None and `completion_tokens` = tokens
  written before it;
- `tools`: the function tools a call could name (those offered, or the one `tool_choice` names); `tool_call`: the
  tool call answered instead of text (`{"id", "name", "arguments", "malformed"}`, the arguments as sent in full: cut
  short with finish_reason "length"), else None (`llm_locust.sim.apis.tools`);
- `carried_tool_calls`, `carried_tool_results`: the ids of the earlier tool calls the request's history holds and of
  those whose results it carries back; `messages`: its number of messages (Responses: input items; 0 for text
  completions and embeddings);
- `answer`: the answer given instead of the usual words (`llm_locust.sim.answers`): `{"kind", "text", "batch"}` — kind
  "correct" / "wrong" (a question it recognised; None if the response ended before its first token), "valid_json" /
  "invalid_json" (a structured output), the text sent, the running batch it was admitted into —, else None.
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any

from llm_locust.sim.apis.wire import History, Scripted, ToolCall


class TraceRecord:
    """One request's ground truth; see the module docstring for the fields."""

    __slots__ = (
        "accept_delay_s",
        "answer",
        "cancelled",
        "completion_tokens",
        "endpoint",
        "fault",
        "finish_reason",
        "history",
        "id",
        "lora_wait_s",
        "model",
        "parse_s",
        "prefix_blocks",
        "prefix_blocks_hit",
        "prompt_tokens",
        "queue_s",
        "session",
        "stream",
        "t_body",
        "t_done",
        "t_head",
        "t_recv",
        "token_times",
        "tool_call",
        "tools",
    )

    def __init__(self, id: str, endpoint: str, stream: bool, t_recv: float, prompt_tokens: int) -> None:
        self.id = id
        self.endpoint = endpoint
        self.stream = stream
        self.t_recv = t_recv
        self.t_body = t_recv
        self.parse_s = 0.0
        self.prompt_tokens = prompt_tokens
        self.token_times = array("d")
        self.completion_tokens = 0
        self.finish_reason: str | None = None
        self.t_head: float | None = None
        self.t_done = 0.0
        self.queue_s = 0.0
        self.cancelled = False
        self.fault: str | None = None
        self.prefix_blocks = 0
        self.session: str | None = None
        self.prefix_blocks_hit = 0
        self.model = ""
        self.lora_wait_s = 0.0
        self.tools = 0
        self.tool_call: ToolCall | None = None
        self.history: History | None = None
        self.answer: Scripted | None = None
        self.accept_delay_s = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form served by /sim/trace."""
        history = self.history
        return {
            "id": self.id,
            "endpoint": self.endpoint,
            "stream": self.stream,
            "t_recv": self.t_recv,
            "t_body": self.t_body,
            "parse_s": self.parse_s,
            "token_times": self.token_times.tolist(),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "t_head": self.t_head,
            "t_done": self.t_done,
            "queue_s": self.queue_s,
            "cancelled": self.cancelled,
            "fault": self.fault,
            "prefix_blocks": self.prefix_blocks,
            "session": self.session,
            "prefix_blocks_hit": self.prefix_blocks_hit,
            "model": self.model,
            "lora_wait_s": self.lora_wait_s,
            "tools": self.tools,
            "tool_call": None if self.tool_call is None else self.tool_call.to_dict(),
            "carried_tool_calls": list(history.calls) if history else [],
            "carried_tool_results": list(history.results) if history else [],
            "messages": history.messages if history else 0,
            "answer": None if self.answer is None else self.answer.to_dict(),
            "accept_delay_s": self.accept_delay_s,
        }


class RecentRecords:
    """The most recent `limit` finished records (oldest dropped first)."""

    def __init__(self, limit: int) -> None:
        self._records: deque[TraceRecord] = deque(maxlen=max(0, limit))

    def add(self, record: TraceRecord) -> None:
        """Keep `record`, dropping the oldest if the trace is full."""
        self._records.append(record)

    def clear(self) -> None:
        """Forget every record."""
        self._records.clear()

    def to_list(self) -> list[dict[str, Any]]:
        """Return every kept record as a dict, oldest first."""
        return [record.to_dict() for record in self._records]
