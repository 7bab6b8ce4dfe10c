"""The per-request record: timestamps of one streamed completion and the metrics defined on them.

This module is the one place that defines the per-request metrics (docs/metrics.md "Definitions"). All `t_*`
fields are `time.perf_counter()` seconds on the process that sent the request; `None` means
the moment never happened (e.g. no token arrived).

- TTFT  = t_first - t_send: first event carrying generated text (content, reasoning or a tool
  call); role-only, usage-only and empty chunks do not count.
- TTFO  = t_first_content - t_send: first non-reasoning content.
- E2E   = t_last - t_send: last token-bearing event (t_done, the stream end, is kept too).
- TPOT  = (t_last - t_first) / (N - 1) for N >= 2 output tokens (GuideLLM/AIPerf "ITL").
- ITL   = every gap between consecutive token-bearing events (vLLM's ITL), in `itl_us`.
- queue delay = t_send - t_sched: how late an open-loop request left (t_sched: when the
  arrival process wanted it sent; None in closed loop).
- connection phases: `connect_s`, `tls_handshake_s` (a new connection's TCP connect and TLS handshake; None on a
  reused one), upload = t_uploaded - t_send (to the request's last byte handed to the kernel: a body larger than the
  kernel's send buffer waits there for the server to read) and TTFB = t_headers - t_send (the response headers).
  t_send is taken before the connection is
  checked out, so a new connection's connect and handshake are inside TTFB and TTFT (as in vLLM's bench and
  GuideLLM); these show the parts.
- time to the complete tool call = t_tool_call - t_send: the arrival of the last event that carried a part of a
  tool call (its id, name or arguments); the calls themselves in `tool_calls`.
- agent session (`agent`, on a session's last request): steps, tool calls, duration = last stream end - first
  send = time waiting for the model (each step's t_done - t_send, summed) + time in tools (each step's t_done to the
  next step's t_send).
- expected prefix reuse = prefix_blocks_seen / prefix_blocks, summed over requests (`workload/prefix_blocks.py`).
- cancelled: the client closed the stream early on purpose; not a failure, and not a success: its TTFT counts,
  its E2E (to its last token) and output tokens are kept apart.
- server request id: `server_request_id`, what joins the record with the server's request logs (the `x-request-id`
  header, else the response's `id`).
- N     = output tokens: usage.completion_tokens when the server sent usage, else the local
  tokenizer's count of the streamed text (--tokenizer), else the number of token-bearing events;
  `token_source` says which. Reasoning tokens (part of N) come from
  usage.completion_tokens_details.reasoning_tokens when the server sends it.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from enum import StrEnum
from time import perf_counter
from typing import Protocol

from llm_locust.metrics.request import NO_SPEC, RequestSpec
from llm_locust.metrics.scoring import Reference
from llm_locust.redact import redact


class ErrorKind(StrEnum):
    """The small fixed set of failure kinds; every failed request has exactly one."""

    HTTP_429 = "http_429"  # throttled by the server
    HTTP_4XX = "http_4xx"  # other client errors: bad model name, auth, bad request
    HTTP_5XX = "http_5xx"  # server errors
    REDIRECT = "redirect"  # a 3xx answer: never followed (it would take the request and its credentials elsewhere)
    CONNECT = "connect"  # could not connect: refused, unreachable, DNS, connect timeout
    TLS = "tls"  # the server's TLS certificate was rejected (unknown issuer, wrong host name, expired), or the URL's
    # scheme is not what the server speaks (https:// to plain HTTP, http:// to TLS)
    TIMEOUT = "timeout"  # first-token, read (idle) or whole-request timeout hit
    TRANSPORT = "transport"  # connection reset/closed mid-response, HTTP protocol error
    STREAM_ERROR = "stream_error"  # the server sent an error object inside the stream
    OVERLOADED = "overloaded"  # an Anthropic `error` event of type overloaded_error inside the stream
    RESPONSE_FAILED = "response_failed"  # a Responses API `response.failed` event
    RESPONSE_INCOMPLETE = "response_incomplete"  # `response.incomplete` for another reason than max_output_tokens
    BAD_STREAM = "bad_stream"  # not SSE, or a chunk that is not valid JSON
    INCOMPLETE = "incomplete"  # the stream ended without its last event ([DONE], finish_reason, ...)
    NO_TOKENS = "no_tokens"  # the stream finished but carried no generated token
    TOOL_CALL_JSON = "tool_call_json"  # a streamed tool call's arguments are not a JSON object
    CHECK = "check"  # a scenario's own check of the answer failed it (`catch_response`: `failure(reason)`)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model streamed: its `id` (chat's `tool_calls[].id`, the Responses item's `call_id`, the
    Messages `tool_use` block's `id`), the function's `name`, and its `arguments` as the streamed JSON text (the
    argument pieces concatenated in arrival order)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class AgentSummary:
    """An agent session, on its last request's record: its `steps` (requests), the `tool_calls` its answers made, its
    duration (first request sent to last stream end), of which waiting for the model (each step's send to stream end,
    summed) and in tools (each step's stream end to the next step's send: the tool's latency and the client's time in
    between), seconds; `ok`: every step succeeded."""

    steps: int
    tool_calls: int
    duration_s: float
    model_s: float
    tool_s: float
    ok: bool


class TokenSource(StrEnum):
    """Where a request's output-token count came from."""

    USAGE = "usage"  # usage.completion_tokens sent by the server
    TOKENIZER = "tokenizer"  # the local tokenizer's count of the streamed text (--tokenizer)
    EVENTS = "events"  # fallback: the number of token-bearing events


@dataclass(slots=True)
class RequestRecord:
    """Everything measured about one request; filled by the client, read by the metrics."""

    endpoint: str
    t_send: float
    t_sched: float | None = None  # open loop: when the arrival process wanted it sent
    step: int = -1  # index of the sweep step it was sent in (-1: not a sweep)
    measured: bool = True  # sent after the step's warm-up: counts for the step
    spec: RequestSpec = NO_SPEC  # the request's facts, as its call made them (read through the properties below)
    t_first: float | None = None
    t_first_content: float | None = None
    t_last: float | None = None
    t_done: float | None = None
    events: int = 0  # token-bearing events received
    itl_us: array = field(default_factory=lambda: array("q"))  # gaps between token events, µs
    usage_completion_tokens: int | None = None
    local_output_tokens: int | None = None  # --tokenizer: the client's count of the streamed text
    prompt_tokens: int | None = None  # usage.prompt_tokens (the server's count)
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens, when sent
    inputs: int = 0  # embeddings: the inputs the request carried (0 for a completion)
    output_bytes: int = 0  # decoded bytes of the media its answer carried, as its API's reader counts them (images)
    output_s: float = 0.0  # seconds of media its answer carried, as its API's reader counts them (text to speech)
    finish_reason: str | None = None
    saw_done: bool = False
    status_code: int = 0
    error_kind: ErrorKind | None = None
    error_message: str = ""
    cancelled: bool = False  # the client closed the stream early on purpose (--cancel-rate): neither ok nor failed
    # its connection: None before one was taken from the pool (e.g. the connect failed); True: opened for it
    new_connection: bool | None = None
    connect_s: float | None = None  # a new connection's TCP connect (and proxy tunnel), seconds
    tls_handshake_s: float | None = None  # a new https connection's TLS handshake, seconds
    t_uploaded: float | None = None  # the request's last byte handed to the kernel (its connection's sendall returned)
    t_headers: float | None = None  # arrival (kernel receive time) of the read that completed the response head
    retried_stale: bool = False  # sent again on a new connection: the reused one was closed before any response byte
    # (dimension, label) breakdowns it also counts in, e.g. ("replica", "2"); see recorder.GroupKey
    groups: tuple[tuple[str, str], ...] = ()
    # the server's id of the request: its `x-request-id` response header, else the response's own `id` (a chat or
    # completion chunk's `id`, the Responses API's response.id, the Messages API's message.id); "" when it sent none
    server_request_id: str = ""
    answer_text: str | None = None  # the generated text as the API's event text gives it (kept when asked: sessions)
    # kept with answer_text: the answer's own text (no reasoning, no tool call) and the reasoning text, ("", "") when
    # the stream had none; None when not kept
    content_text: str | None = None
    reasoning_text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()  # the answer's tool calls, in the order they started
    t_tool_call: float | None = None  # arrival of the last event carrying a part of a tool call: all are complete
    agent: AgentSummary | None = None  # an agent session's last request: the session's figures
    score: float | None = None  # its answer's score in [0, 1] (`metrics.scoring`), None: not scored

    @property
    def input_s(self) -> float:
        """Seconds of media (audio) the request carried (`RequestSpec.input_s`; 0.0: none)."""
        return self.spec.input_s

    @property
    def real_time_factor(self) -> float | None:
        """Processing time over the media's duration: E2E / the seconds of media the request carried (`input_s`) or
        its answer did (`output_s`) (None: no media, or not finished)."""
        e2e_s, media_s = self.e2e_s, self.spec.input_s + self.output_s
        return None if e2e_s is None or not media_s else e2e_s / media_s

    @property
    def expected_prompt_tokens(self) -> int | None:
        """The client's count of the prompt it sent, when known (`RequestSpec.expected_prompt_tokens`)."""
        return self.spec.expected_prompt_tokens

    @property
    def prefix_blocks(self) -> int:
        """Whole 512-token shared blocks in its prompt (trace hash_ids, prefix pools)."""
        return self.spec.prefix_blocks[0]

    @property
    def prefix_blocks_seen(self) -> int:
        """Of its `prefix_blocks`, those an earlier request (in workload order) had: expected cache hits."""
        return self.spec.prefix_blocks[1]

    @property
    def model(self) -> str:
        """The model the request named (--model, or drawn from --model-mix)."""
        return self.spec.model

    @property
    def session(self) -> str:
        """The conversation (session) it belongs to: its id, sent in --session-header ("": none)."""
        return self.spec.session

    @property
    def turn(self) -> int:
        """Its 1-based turn in a multi-turn session (0: not part of a multi-turn session)."""
        return self.spec.turn

    @property
    def reference(self) -> Reference | None:
        """What its answer is scored against (None: not scored)."""
        return self.spec.reference

    def fail(self, kind: ErrorKind, message: str) -> None:
        """Mark the request failed (the first failure wins: it is the cause); secrets are redacted."""
        if self.error_kind is None:
            self.error_kind = kind
            self.error_message = redact(message)

    @property
    def ok(self) -> bool:
        """True when the request succeeded and its latencies count (a cancelled request did not: it is neither ok
        nor failed)."""
        return self.error_kind is None and not self.cancelled

    @property
    def output_tokens(self) -> int:
        """Output tokens N: the server's usage count if it sent one, else the local tokenizer's count, else
        token events."""
        if self.usage_completion_tokens is not None:
            return self.usage_completion_tokens
        if self.local_output_tokens is not None:
            return self.local_output_tokens
        return self.events

    @property
    def token_source(self) -> TokenSource:
        """Which source `output_tokens` came from."""
        if self.usage_completion_tokens is not None:
            return TokenSource.USAGE
        return TokenSource.EVENTS if self.local_output_tokens is None else TokenSource.TOKENIZER

    @property
    def upload_s(self) -> float | None:
        """Time to send the request, seconds: `t_uploaded` − `t_send` (a new connection's connect and handshake
        inside, as in TTFB); None where the client does not see its socket (the openai SDK) or nothing was sent."""
        return None if self.t_uploaded is None else self.t_uploaded - self.t_send

    @property
    def ttfb_s(self) -> float | None:
        """Time to the response headers ("first byte"), seconds: `t_headers` − `t_send`. Like TTFT it includes a new
        connection's connect and handshake (`connect_s`, `tls_handshake_s`): `t_send` is taken before the
        connection is checked out."""
        return None if self.t_headers is None else self.t_headers - self.t_send

    @property
    def ttft_s(self) -> float | None:
        """Time to first token, seconds."""
        return None if self.t_first is None else self.t_first - self.t_send

    @property
    def ttfo_s(self) -> float | None:
        """Time to first non-reasoning output, seconds."""
        return None if self.t_first_content is None else self.t_first_content - self.t_send

    @property
    def e2e_s(self) -> float | None:
        """End-to-end latency to the last token, seconds."""
        return None if self.t_last is None else self.t_last - self.t_send

    @property
    def tool_call_s(self) -> float | None:
        """Time to the complete tool call(s), seconds: `t_tool_call` − `t_send` (None: the answer has none)."""
        return None if self.t_tool_call is None else self.t_tool_call - self.t_send

    @property
    def agent_session_s(self) -> float | None:
        """An agent session's duration, seconds, on its last request (None on the others): see `AgentSummary`."""
        return None if self.agent is None else self.agent.duration_s

    @property
    def agent_model_s(self) -> float | None:
        """An agent session's time waiting for the model, seconds, on its last request (None on the others)."""
        return None if self.agent is None else self.agent.model_s

    @property
    def agent_tool_s(self) -> float | None:
        """An agent session's time in tools, seconds, on its last request (None on the others)."""
        return None if self.agent is None else self.agent.tool_s

    @property
    def queue_delay_s(self) -> float | None:
        """Open loop: seconds the request was sent after it was due (client queue delay)."""
        return None if self.t_sched is None else self.t_send - self.t_sched

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first, seconds; None when N < 2."""
        n = self.output_tokens
        if n < 2 or self.t_first is None or self.t_last is None:
            return None
        return (self.t_last - self.t_first) / (n - 1)


class Schedule(Protocol):
    """When a request was due and where it counts: the pacer's ticket (`load.pacing.Ticket`)."""

    @property
    def t_sched(self) -> float | None: ...
    @property
    def step(self) -> int: ...
    @property
    def measured(self) -> bool: ...


def open_record(
    endpoint: str, spec: RequestSpec, schedule: Schedule | None, groups: tuple[tuple[str, str], ...] = ()
) -> RequestRecord:
    """The record of `spec`, a request of `endpoint` being sent now (`t_send`, perf_counter; the transport takes it
    again as the request leaves), holding `spec` (its facts: expected prompt tokens, shared prompt blocks, model,
    session and turn, reference), with what its `schedule` says (due time, step, whether it counts) and the breakdowns
    it counts in: the spec's own, its prefix reuse ("reuse", when it has shared blocks), where it goes (`groups`: its
    replica's) and its session turn ("turn", in a multi-turn session)."""
    reuse = (reuse_group(*spec.prefix_blocks),) if spec.prefix_blocks[0] else ()
    turn = (turn_group(spec.turn),) if spec.turn else ()
    record = RequestRecord(endpoint, perf_counter(), spec=spec, groups=(*spec.groups, *reuse, *groups, *turn))
    if schedule is not None:
        record.t_sched, record.step, record.measured = schedule.t_sched, schedule.step, schedule.measured
    return record


TURN_BUCKETS = (1, 2, 4, 8, 16)
"""Upper bounds (inclusive) of the "turn" breakdown's buckets: "1", "2", "3-4", "5-8", "9-16", then "17+"."""


def turn_group(turn: int) -> tuple[str, str]:
    """The ("turn", label) breakdown pair of the 1-based `turn` of a multi-turn session: "1", "2", "3-4", "5-8",
    "9-16" or "17+"."""
    low = 1
    for high in TURN_BUCKETS:
        if turn <= high:
            return ("turn", str(high) if low == high else f"{low}-{high}")
        low = high + 1
    return ("turn", f"{low}+")


REUSE_BUCKETS_PCT = (25, 50, 75)
"""Upper bounds (exclusive, %) of the partial-reuse buckets of the "reuse" breakdown, between "0%" and "100%"."""


def reuse_group(blocks: int, seen: int) -> tuple[str, str]:
    """The ("reuse", label) breakdown pair of a request with `blocks` shared prompt blocks, `seen` of them seen
    before: "0%", "1-24%", "25-49%", "50-74%", "75-99%" or "100%" (the share of its whole blocks seen before)."""
    if seen <= 0:
        return ("reuse", "0%")
    if seen >= blocks:
        return ("reuse", "100%")
    pct = 100 * seen // blocks
    low = 1
    for high in REUSE_BUCKETS_PCT:
        if pct < high:
            return ("reuse", f"{low}-{high - 1}%")
        low = high
    return ("reuse", f"{low}-99%")


def agent_step_group(step: int) -> tuple[str, str]:
    """The ("agent_step", label) breakdown pair of an agent session's 1-based `step`, in the turns' buckets
    (`turn_group`): "1", "2", "3-4", "5-8", "9-16" or "17+"."""
    return ("agent_step", turn_group(step)[1])
