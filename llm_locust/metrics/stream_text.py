"""The generated text of a whole streamed response: for counting its tokens on the client (`--tokenizer`) and for a
kept answer (scored, returned to a scenario).

The stream's reader (`framing.Framing.reader`, the one that times the events) hands each event's payload to
`StreamText.keep` as it decodes it, so the body is never decoded twice: an SSE event's data, an event-stream
message's payload, and — for the usual chat chunk the reader recognises without decoding it
(`protocol.TokenChunks`) — only its content string literal, quotes included. The payloads are decoded to text after
the stream, in batches (`KEEP_EVENTS`; a run of content literals in one JSON parse). The text is what the API's
parser counts as generated, read by the API's `EventText` (`apis.Api.event_text`, in the API's module): for OpenAI
chunks (`openai_text`, shared by chat and text completions) chat `delta.content`, `delta.reasoning_content` /
`delta.reasoning`, tool calls' function names and arguments, and text-completion `text`; for the other APIs the
text of their token-bearing events. Pure; never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import orjson

if TYPE_CHECKING:
    from llm_locust.metrics.record import RequestRecord

_DONE = b"[DONE]"
_QUOTE = b'"'

EventText = Callable[[dict], "str | None"]
"""The generated text one decoded event carries (None or "": none)."""

AnswerParts = Callable[[dict], "tuple[str | None, str | None]"]
"""The answer's own text and the reasoning text one decoded event carries (None or "": none of that kind; a tool
call's name and arguments are neither)."""

KeepPayload = Callable[[bytes], None]
"""Where a stream's reader hands each event's payload (`StreamText.keep`)."""


class TokenCounter(Protocol):
    """Anything that counts the tokens of a text (`--tokenizer`: `workload.tokens`; the transport counts a stream's
    generated text with it, `keep_text`)."""

    exact_words: bool
    """True when every whitespace-separated word of the synthetic vocabulary is exactly one token."""

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        ...


KEEP_EVENTS = 4096
"""Payloads a `StreamText` holds before decoding them to text (bounds its memory per stream)."""


class StreamText:
    """The generated text of one streamed response, from its events' payloads in arrival order.

    `keep` only holds a payload — an event's data (JSON, or `[DONE]`), or a usual chat chunk's content string
    literal (it starts with a quote: no event's JSON object does) —; every `KEEP_EVENTS` payloads they are decoded
    to text in one go. `text` decodes the rest and returns the whole text; payloads after `[DONE]` and payloads that
    are not JSON objects of the expected shape add nothing. `event_text` reads one event's text (the stream's
    API's); `answer_parts` (the API's, when given) also splits it into the answer's own text and the reasoning text
    (`answer`; for a pair with a one-pass reader, `_ONE_PASS`, both are read in one pass per event).
    """

    __slots__ = ("_answer_parts", "_content", "_done", "_event_text", "_held", "_parts", "_reasoning")

    def __init__(self, event_text: EventText, answer_parts: AnswerParts | None = None) -> None:
        self._event_text = event_text
        self._answer_parts = answer_parts
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._held: list[bytes] = []
        self._parts: list[str] = []
        self._done = False

    def keep(self, payload: bytes) -> None:
        """Hold one event's payload (bytes-like; it must not change afterwards)."""
        held = self._held
        held.append(payload)
        if len(held) >= KEEP_EVENTS:
            self._drain()

    def text(self) -> str:
        """The generated text of every payload kept."""
        self._drain()
        return "".join(self._parts)

    def answer(self) -> tuple[str, str]:
        """(the answer's own text, the reasoning text) of every payload kept, after `text` ("" without
        `answer_parts`)."""
        return "".join(self._content), "".join(self._reasoning)

    def _drain(self) -> None:
        """Decode the held payloads into text parts, in order."""
        held, self._held = self._held, []
        literals: list[bytes] = []  # a run of content string literals, parsed together
        for payload in held:
            if self._done:
                break
            if payload[:1] == _QUOTE:
                literals.append(payload)
                continue
            if literals:
                self._add_content(literals)
                literals = []
            if payload == _DONE:
                self._done = True
                break
            self._add_event(payload)
        if literals:
            self._add_content(literals)

    def _add_content(self, literals: list[bytes]) -> None:
        """The text of a run of content string literals (chat `delta.content`: the answer's own text)."""
        try:
            text = "".join(orjson.loads(b"[" + b",".join(literals) + b"]"))
        except orjson.JSONDecodeError:  # a literal that is not valid UTF-8 (the reader checks quotes, not encoding)
            text = "".join(_string(literal) for literal in literals)
        self._parts.append(text)
        if self._answer_parts is not None:
            self._content.append(text)

    def _add_event(self, payload: bytes) -> None:
        """The text of one event's JSON payload (nothing for any other payload)."""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if type(chunk) is not dict:
            return
        one_pass = _ONE_PASS.get((self._event_text, self._answer_parts))
        if one_pass is not None:  # the text and its split read in one pass over the chunk
            text, content, reasoning = one_pass(chunk)
        else:
            text = self._event_text(chunk)
            content, reasoning = self._answer_parts(chunk) if text and self._answer_parts is not None else (None, None)
        if text:
            self._parts.append(text)
            if content:
                self._content.append(content)
            if reasoning:
                self._reasoning.append(reasoning)


def _string(literal: bytes) -> str:
    """One JSON string literal's text ("" when it is not one)."""
    try:
        text = orjson.loads(literal)
    except orjson.JSONDecodeError:
        return ""
    return text if type(text) is str else ""


def openai_text(chunk: dict) -> str | None:
    """The generated text of one decoded OpenAI chunk (first choice): its pieces in order; None for any other
    shape."""
    choices = chunk.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")
        return text if type(text) is str else None
    parts = [delta.get(key) for key in ("reasoning_content", "reasoning", "content")]
    calls = delta.get("tool_calls")
    if type(calls) is list:
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                parts += [function.get("name"), function.get("arguments")]
    return "".join(part for part in parts if type(part) is str)


def openai_parts(chunk: dict) -> tuple[str | None, str | None]:
    """(answer text, reasoning text) of one decoded OpenAI chunk (first choice): chat `delta.content` and
    `delta.reasoning_content` / `delta.reasoning`, text-completion `text`."""
    choices = chunk.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None, None
    choice = choices[0]
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")
        return (text if type(text) is str else None), None
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    return (content if type(content) is str else None), (reasoning if type(reasoning) is str else None)


def openai_answer(chunk: dict) -> tuple[str | None, str | None, str | None]:
    """(`openai_text`, then `openai_parts`' answer text and reasoning text) of one decoded OpenAI chunk, read in one
    pass: what a kept answer's decode reads per event (`StreamText`)."""
    choices = chunk.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return None, None, None
    choice = choices[0]
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")
        return (text, text, None) if type(text) is str else (None, None, None)
    content, reasoning_content, reasoning = delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning")
    if type(content) is not str:
        content = None
    calls = delta.get("tool_calls")
    if reasoning_content is None and reasoning is None and calls is None:  # the usual content-only chunk
        return content or "", content, None
    parts = [part for part in (reasoning_content, reasoning, content) if type(part) is str]
    if type(calls) is list:
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                parts += [part for part in (function.get("name"), function.get("arguments")) if type(part) is str]
    split = reasoning_content or reasoning
    return "".join(parts), content, (split if type(split) is str else None)


_ONE_PASS: dict[tuple[Any, Any], Callable[[dict], tuple[str | None, str | None, str | None]]] = {
    (openai_text, openai_parts): openai_answer
}
"""(event text, answer parts) → the reader that returns both in one pass (`StreamText` uses it when the pair is its
own)."""


def keep_text(
    record: RequestRecord, text: str, counter: TokenCounter | None, keep_answer: bool, parts: tuple[str, str]
) -> None:
    """Put a finished stream's generated `text` on `record`: its tokens counted by `counter` (--tokenizer) when the
    request succeeded, the text itself as `answer_text` when `keep_answer` (also of a failed or cancelled stream:
    what arrived), with its `parts`, (the answer's own text, the reasoning text), as `content_text` and
    `reasoning_text`."""
    if counter is not None and record.ok:
        record.local_output_tokens = counter.count(text)
    if keep_answer:
        record.answer_text = text
        record.content_text, record.reasoning_text = parts
