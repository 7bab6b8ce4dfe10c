"""The generated text of a whole streamed response, for counting its tokens on the client (`--tokenizer`).

Read once per request, after its stream ended, from the body bytes kept as they arrived — never per event, so the
client's hot path (`protocol.EventStream`) stays as it is. The text is what `protocol` counts as generated: chat
`delta.content`, `delta.reasoning_content` / `delta.reasoning`, tool calls' function names and arguments, and
text-completion `text`. Pure; never raises.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from llm_locust.metrics.sse import SSEDecoder

_DONE = b"[DONE]"


def streamed_text(pieces: Iterable[bytes | bytearray]) -> str:
    """The generated text of an SSE body given as the pieces it arrived in (concatenated in order); events that
    are not JSON objects of the expected shape add nothing."""
    decoder = SSEDecoder()
    events = decoder.feed(b"".join(pieces), 0.0) + decoder.flush(0.0)
    parts: list[str] = []
    for event in events:
        if event.data == _DONE:
            break
        try:
            chunk = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if type(chunk) is dict:
            parts.extend(chunk_text(chunk))
    return "".join(parts)


def chunk_text(chunk: dict) -> list[str]:
    """The pieces of generated text in one decoded chunk (first choice), in order; [] for any other shape."""
    choices = chunk.get("choices")
    if type(choices) is not list or not choices or type(choices[0]) is not dict:
        return []
    choice = choices[0]
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")
        return [text] if type(text) is str else []
    parts = [delta.get(key) for key in ("reasoning_content", "reasoning", "content")]
    calls = delta.get("tool_calls")
    if type(calls) is list:
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                parts += [function.get("name"), function.get("arguments")]
    return [part for part in parts if type(part) is str and part]
