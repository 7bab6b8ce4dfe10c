"""The generated text of a whole streamed response, for counting its tokens on the client (`--tokenizer`).

The body's bytes are kept as they arrive and decoded to text in large batches (`StreamText`) — never per event,
so the client's hot path (`protocol.EventStream`) stays as it is; the text is counted once, at the end. The text
is what the API's parser counts as generated, read by the API's `EventText` (`apis.Api.event_text`): for OpenAI
chunks (`openai_text`) chat `delta.content`, `delta.reasoning_content` / `delta.reasoning`, tool calls' function
names and arguments, and text-completion `text`; the deltas of the Responses and Messages APIs' token-bearing
events (`responses_stream.event_text`, `messages_stream.event_text`); the parts of Gemini's responses
(`gemini_stream.event_text`). Pure; never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from llm_locust.metrics import gemini_stream, messages_stream, responses_stream
from llm_locust.metrics.sse import SSEDecoder

_DONE = b"[DONE]"

EventText = Callable[[dict], "str | None"]
"""The generated text one decoded event carries (None or "": none)."""

AnswerParts = Callable[[dict], "tuple[str | None, str | None]"]
"""The answer's own text and the reasoning text one decoded event carries (None or "": none of that kind; a tool
call's name and arguments are neither)."""

DRAIN_BYTES = 65_536
"""Body bytes a `StreamText` buffers before decoding them to text (bounds its memory per stream)."""


class StreamText:
    """The generated text of one streamed response, from the pieces of its body in arrival order.

    `add` only buffers a piece; every `DRAIN_BYTES` the buffer is decoded to text in one go, so a stream costs at
    most that much body memory plus its text, and no work per event. `text` decodes the rest and returns the
    whole text; events after `[DONE]` and payloads that are not JSON objects of the expected shape add nothing.
    `event_text` reads one event's text (the stream's API's; by default any built-in API's, `chunk_text`);
    `answer_parts` (the API's, when given) also splits it into the answer's own text and the reasoning text (`answer`;
    for a pair with a one-pass reader, `_ONE_PASS`, both are read in one pass per event);
    `decoder`: the stream's framing's (`framing.Framing.decoder`; default SSE).
    """

    __slots__ = (
        "_answer_parts", "_content", "_decoder", "_done", "_event_text", "_parts", "_pending", "_pending_bytes",
        "_reasoning",
    )  # fmt: skip

    def __init__(
        self, event_text: EventText | None = None, answer_parts: AnswerParts | None = None, decoder: Any = None
    ) -> None:
        self._event_text = event_text or chunk_text
        self._answer_parts = answer_parts
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._decoder = decoder or SSEDecoder()
        self._pending: list[bytes | bytearray] = []
        self._pending_bytes = 0
        self._parts: list[str] = []
        self._done = False

    def add(self, piece: bytes | bytearray) -> None:
        """Keep one piece of body (it must not change afterwards)."""
        self._pending.append(piece)
        self._pending_bytes += len(piece)
        if self._pending_bytes >= DRAIN_BYTES:
            self._drain(end=False)

    def text(self) -> str:
        """The generated text of everything added (the body's end: a last event without its blank line counts)."""
        self._drain(end=True)
        return "".join(self._parts)

    def answer(self) -> tuple[str, str]:
        """(the answer's own text, the reasoning text) of everything added, after `text` ("" without
        `answer_parts`)."""
        return "".join(self._content), "".join(self._reasoning)

    def _drain(self, end: bool) -> None:
        """Decode the buffered pieces (and, at the `end`, what the decoder still holds) into text parts."""
        data = b"".join(self._pending)
        self._pending, self._pending_bytes = [], 0
        try:
            events = self._decoder.feed(data, 0.0) if data else []
        except ValueError:  # a malformed event-stream message: nothing after it can be read
            self._done = True
            return
        if end:
            events += self._decoder.flush(0.0)
        loads, one_pass = orjson.loads, _ONE_PASS.get((self._event_text, self._answer_parts))
        for event in events:
            if self._done or event.data == _DONE:
                self._done = True
                return
            try:
                chunk = loads(event.data)
            except orjson.JSONDecodeError:
                continue
            if type(chunk) is not dict:
                continue
            if one_pass is not None:  # the text and its split read in one pass over the chunk
                text, content, reasoning = one_pass(chunk)
                if text:
                    self._parts.append(text)
                    if content:
                        self._content.append(content)
                    if reasoning:
                        self._reasoning.append(reasoning)
            else:
                text = self._event_text(chunk)
                if text:
                    self._parts.append(text)
                    if self._answer_parts is not None:
                        content, reasoning = self._answer_parts(chunk)
                        if content:
                            self._content.append(content)
                        if reasoning:
                            self._reasoning.append(reasoning)


def chunk_text(chunk: dict) -> str | None:
    """The generated text of a decoded event of any built-in API: a typed Responses or Messages event, a Gemini
    response (`candidates`), else an OpenAI chunk (`openai_text`)."""
    kind = chunk.get("type")
    if type(kind) is str:  # a Responses or Messages event
        return (responses_stream if kind.startswith("response.") else messages_stream).event_text(chunk)
    if "candidates" in chunk:
        return gemini_stream.event_text(chunk)
    return openai_text(chunk)


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
