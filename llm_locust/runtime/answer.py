"""What a scenario's call returns (`runtime.llm_client.LLMClient`): the `Answer` — its text, reasoning, tool calls
(`ToolCallAnswer`), usage (`Usage`), finish reason and the measurements of its `RequestRecord` — and the
`CheckedAnswer` a scenario judges with `catch_response=True` (Locust's `success()` / `failure(reason)` idiom).
Public through `llm_locust.users` (docs/scenarios.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import orjson

from llm_locust.metrics.record import ErrorKind, RequestRecord


@dataclass(frozen=True, slots=True)
class Usage:
    """The server's token counts of one answer (None: not sent): prompt, completion (output) and, of those,
    reasoning tokens."""

    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None


@dataclass(frozen=True, slots=True)
class ToolCallAnswer:
    """One tool call of an answer: its id (for the Responses API the item's `call_id`, the id its
    `function_call_output` names), the function's name and its arguments parsed from the streamed JSON (`{}` when
    they are not a JSON object: the request failed with `tool_call_json`)."""

    id: str
    name: str
    arguments: dict[str, Any]


class Answer:
    """What one call returns: the answer (`text`, `reasoning`, `tool_calls`, `usage`, `finish_reason`, `request_id`)
    and how it was measured (`record`, the `RequestRecord` the metrics count; `ttft_s`, `itl_s`, `e2e_s` read it).

    A failed request returns an answer too (`ok` False, `error` "kind: message"): the scenario decides what follows.
    """

    __slots__ = ("name", "record")

    def __init__(self, record: RequestRecord, name: str) -> None:
        self.record = record
        self.name = name

    @property
    def ok(self) -> bool:
        """True when the request succeeded (a cancelled one did not; a `check` failure makes it False)."""
        return self.record.ok

    @property
    def error(self) -> str | None:
        """ "kind: message" of a failed request, else None."""
        record = self.record
        return None if record.error_kind is None else f"{record.error_kind}: {record.error_message}"

    @property
    def text(self) -> str:
        """The answer's text (content deltas; no reasoning, no tool call); "" for embeddings."""
        return self.record.content_text or ""

    @property
    def reasoning(self) -> str:
        """The reasoning text the stream carried ("" without)."""
        return self.record.reasoning_text or ""

    @property
    def tool_calls(self) -> tuple[ToolCallAnswer, ...]:
        """The answer's tool calls in the order they started, arguments parsed."""
        return tuple(ToolCallAnswer(call.id, call.name, _arguments(call.arguments)) for call in self.record.tool_calls)

    @property
    def usage(self) -> Usage:
        """The server's usage counts."""
        record = self.record
        return Usage(record.prompt_tokens, record.usage_completion_tokens, record.reasoning_tokens)

    @property
    def finish_reason(self) -> str | None:
        """Why generation stopped, as the server said ("stop", "length", "tool_calls", ...), None if not said."""
        return self.record.finish_reason

    @property
    def request_id(self) -> str:
        """The server's id of the request (its `x-request-id` header, else the response's `id`; "" if none)."""
        return self.record.server_request_id

    @property
    def ttft_s(self) -> float | None:
        """Time to first token, seconds (None: no token)."""
        return self.record.ttft_s

    @property
    def e2e_s(self) -> float | None:
        """End-to-end latency to the last token, seconds."""
        return self.record.e2e_s

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Every gap between consecutive token events, seconds."""
        return tuple(gap / 1e6 for gap in self.record.itl_us)

    @property
    def score(self) -> float | None:
        """The answer's score in [0, 1] (`score=`), None when it was not scored (none asked, or the request failed)."""
        return self.record.score if self.record.ok else None


class CheckedAnswer(Answer):
    """An answer to judge (`catch_response=True`), as Locust's response context: inside `with`, `failure(reason)`
    makes the request fail with kind `check` — counted, shown and gated like any failure, its measurements kept on
    the record — and `success()` takes a failure back (it cannot make a request that failed on the wire succeed).
    The request is reported when the `with` block ends; an exception raised inside it is the scenario's own, left to
    Locust (its error table), after the request was reported as judged so far."""

    __slots__ = ("_reason", "_report")

    def __init__(self, record: RequestRecord, name: str, report: Callable[[str, RequestRecord], None]) -> None:
        super().__init__(record, name)
        self._report = report  # the client's `LLMClient.report`
        self._reason: str | None = None

    def __enter__(self) -> CheckedAnswer:
        return self

    def success(self) -> None:
        """Take back a `failure` of this block."""
        self._reason = None

    def failure(self, reason: str | BaseException) -> None:
        """Fail the request with kind `check` and `reason` (shown as "check: reason")."""
        self._reason = str(reason)

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._reason is not None:
            self.record.fail(ErrorKind.CHECK, self._reason)
        self._report(self.name, self.record)


def _arguments(text: str) -> dict[str, Any]:
    """A tool call's streamed arguments as a dict ({} when empty or not a JSON object)."""
    try:
        value = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
