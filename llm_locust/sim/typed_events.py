"""The typed SSE events of the Responses API and the Anthropic Messages API, with `openai.EventEncoder`'s interface.

Each event is `event: <type>` plus `data: <JSON with the same type>`. Token events are built from pre-encoded
pieces (no JSON encoding per token), as for chat.

Responses (what OpenAI's API sends): `response.created`, `response.in_progress`, `response.output_item.added`,
`response.content_part.added`, one `response.output_text.delta` per token, then `response.output_text.done`,
`response.content_part.done`, `response.output_item.done` and `response.completed` — or `response.incomplete`
with `incomplete_details.reason` "max_output_tokens" when the output reached `max_output_tokens` — carrying
`usage`. A mid-stream failure is `response.failed` with `response.error`.

Messages (what Anthropic's API sends): `message_start` (input usage), `content_block_start`, `ping`, one
`content_block_delta` / `text_delta` per token, then `content_block_stop`, `message_delta` (`stop_reason`
"end_turn" or "max_tokens", output usage) and `message_stop`. A mid-stream failure is an `error` event of type
`overloaded_error`, the usual one under load.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.openai import CompletionSpec, output_text
from llm_locust.sim.words import WORDS


def _event(kind: str, data: dict[str, Any]) -> bytes:
    """One whole typed SSE event."""
    return b"event: %b\ndata: %b\n\n" % (kind.encode(), orjson.dumps({"type": kind, **data}))


class ResponsesEncoder:
    """The events of one streamed Responses API response (see the module docstring)."""

    __slots__ = ("_item", "_offset", "_response", "_tails", "_token_prefix", "spec")

    _START = 4  # sequence numbers 0..3 are the start events

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._offset = offset
        self._item = f"msg_{response_id}"
        self._response = {"id": response_id, "object": "response", "created_at": created_s, "model": model,
                          "status": "in_progress", "output": [], "usage": None}  # fmt: skip
        ids = b'"item_id":%b,"output_index":0,"content_index":0,"delta":' % orjson.dumps(self._item)
        self._token_prefix = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",' + ids
        self._tails = tuple(orjson.dumps(word) + b',"logprobs":[],"sequence_number":' for word in WORDS)

    def start_events(self) -> bytes:
        """Return the events sent with the response head: created, in progress, output item and content part."""
        item = {"id": self._item, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        where = {"item_id": self._item, "output_index": 0, "content_index": 0}
        return (
            _event("response.created", {"sequence_number": 0, "response": self._response})
            + _event("response.in_progress", {"sequence_number": 1, "response": self._response})
            + _event("response.output_item.added", {"sequence_number": 2, "output_index": 0, "item": item})
            + _event("response.content_part.added", {"sequence_number": 3, **where, "part": part})
        )

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s `response.output_text.delta` as (shared prefix, tail)."""
        return self._token_prefix, self._tails[(self._offset + index) % len(self._tails)] + b"%d}\n\n" % (
            self._START + index
        )

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one delta event carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        text = "".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop))
        return (
            self._token_prefix
            + orjson.dumps(text)
            + b',"logprobs":[],"sequence_number":%d}\n\n' % (self._START + start)
        )

    def text_event(self, text: str) -> bytes:
        """Return a delta event carrying `text` (built per call: for rare events only)."""
        return self._token_prefix + orjson.dumps(text) + b',"logprobs":[],"sequence_number":0}\n\n'

    def end_events(self) -> list[bytes]:
        """Return the events after the last token, ending with `response.completed` (or `response.incomplete`)."""
        spec = self.spec
        text = output_text(spec, self._offset)
        sequence = self._START + spec.output_tokens
        where = {"item_id": self._item, "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"id": self._item, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        truncated = spec.finish_reason == "length"
        usage = {
            "input_tokens": spec.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": spec.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": spec.prompt_tokens + spec.output_tokens,
        }
        incomplete = {"reason": "max_output_tokens"} if truncated else None
        status = "incomplete" if truncated else "completed"
        response = {**self._response, "status": status, "output": [item], "usage": usage,
                    "incomplete_details": incomplete}  # fmt: skip
        return [
            _event("response.output_text.done", {"sequence_number": sequence, **where, "text": text}),
            _event("response.content_part.done", {"sequence_number": sequence + 1, **where, "part": part}),
            _event("response.output_item.done", {"sequence_number": sequence + 2, "output_index": 0, "item": item}),
            _event(
                "response.incomplete" if truncated else "response.completed",
                {"sequence_number": sequence + 3, "response": response},
            ),
        ]

    def error_event(self, message: str) -> bytes:
        """Return `response.failed` with a server error (a mid-stream failure)."""
        error = {"code": "server_error", "message": message}
        return _event("response.failed", {"sequence_number": 0, "response": {**self._response, "status": "failed",
                                                                            "error": error}})  # fmt: skip

    def body(self) -> bytes:
        """Return the non-streamed response JSON."""
        events = self.end_events()
        return orjson.dumps(orjson.loads(events[-1].split(b"data: ", 1)[1])["response"])


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
            _event("message_start", {"message": message})
            + _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            + _event("ping", {})
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
            _event("content_block_stop", {"index": 0}),
            _event("message_delta", {"delta": delta, "usage": {"output_tokens": self.spec.output_tokens}}),
            _event("message_stop", {}),
        ]

    def error_event(self, message: str) -> bytes:
        """Return an `error` event of type overloaded_error (a mid-stream failure)."""
        return _event("error", {"error": {"type": "overloaded_error", "message": message}})

    def body(self) -> bytes:
        """Return the non-streamed response JSON."""
        spec = self.spec
        return orjson.dumps({
            "id": self._id, "type": "message", "role": "assistant", "model": self._model,
            "content": [{"type": "text", "text": output_text(spec, self._offset)}],
            "stop_reason": self._stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens},
        })  # fmt: skip
