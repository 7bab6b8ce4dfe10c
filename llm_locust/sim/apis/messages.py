"""The Anthropic Messages API (`POST /v1/messages`): its request and its typed events.

The request's `messages`, `system` (a string or a list of text blocks) and required `max_tokens`. Each event is
`event: <type>` plus `data: <JSON with the same type>`. What Anthropic's API sends: `message_start` (input usage),
`content_block_start`, `ping`, one `content_block_delta` / `text_delta` per token, then `content_block_stop`,
`message_delta` (`stop_reason` "end_turn" or "max_tokens", output usage) and `message_stop`. A mid-stream failure
is an `error` event of type `overloaded_error`, the usual one under load.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.wire import (
    Api,
    ApiError,
    CompletionSpec,
    completion_spec,
    message_words,
    messages_prompt,
    optional_int,
    output_text,
    typed_event,
)
from llm_locust.sim.words import WORDS


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a Messages request `data` (ApiError if it is unacceptable)."""
    prompt_tokens, prompt_text = messages_prompt(data)
    system = data.get("system")
    if system is not None:
        prompt_tokens += message_words({"content": system})
    if "max_tokens" not in data:
        raise ApiError(400, "invalid_request_error", "max_tokens: Field required")
    max_tokens = optional_int(data, "max_tokens")
    return completion_spec(data, "messages", prompt_tokens, prompt_text, max_tokens, natural_tokens)


class MessagesEncoder:
    """The events of one streamed Anthropic Messages response (see the module docstring)."""

    __slots__ = ("_id", "_model", "_offset", "_tails", "spec")

    _TOKEN_PREFIX = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
        b'"text":'
    )

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._id = response_id
        self._model = model
        self._offset = offset
        self._tails = tuple(orjson.dumps(word) + b"}}\n\n" for word in WORDS)

    @property
    def _stop_reason(self) -> str:
        return "max_tokens" if self.spec.finish_reason == "length" else "end_turn"

    def start_events(self) -> bytes:
        """Return the events sent with the response head: message_start (input usage), content_block_start, ping."""
        message = {"id": self._id, "type": "message", "role": "assistant", "content": [], "model": self._model,
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": self.spec.prompt_tokens, "output_tokens": 1}}  # fmt: skip
        return (
            typed_event("message_start", {"message": message})
            + typed_event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            + typed_event("ping", {})
        )

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s `content_block_delta` as (shared prefix, tail)."""
        return self._TOKEN_PREFIX, self._tails[(self._offset + index) % len(self._tails)]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one delta event carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        return self.text_event("".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop)))

    def text_event(self, text: str) -> bytes:
        """Return a delta event carrying `text` (built per call: for rare events only)."""
        return self._TOKEN_PREFIX + orjson.dumps(text) + b"}}\n\n"

    def end_events(self) -> list[bytes]:
        """Return the events after the last token: content_block_stop, message_delta (usage), message_stop."""
        delta = {"stop_reason": self._stop_reason, "stop_sequence": None}
        return [
            typed_event("content_block_stop", {"index": 0}),
            typed_event("message_delta", {"delta": delta, "usage": {"output_tokens": self.spec.output_tokens}}),
            typed_event("message_stop", {}),
        ]

    def error_event(self, message: str) -> bytes:
        """Return an `error` event of type overloaded_error (a mid-stream failure)."""
        return typed_event("error", {"error": {"type": "overloaded_error", "message": message}})

    def body(self) -> bytes:
        """Return the non-streamed response JSON."""
        spec = self.spec
        return orjson.dumps({
            "id": self._id, "type": "message", "role": "assistant", "model": self._model,
            "content": [{"type": "text", "text": output_text(spec, self._offset)}],
            "stop_reason": self._stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens},
        })  # fmt: skip


API = Api("messages", "/v1/messages", "msg", parse, MessagesEncoder)
