"""The Anthropic Messages API (`POST /v1/messages`): its request and its typed events.

The request's `messages`, `system` (a string or a list of text blocks) and required `max_tokens`. Each event is
`event: <type>` plus `data: <JSON with the same type>`. What Anthropic's API sends: `message_start` (input usage),
`content_block_start`, `ping`, one `content_block_delta` / `text_delta` per token, then `content_block_stop`,
`message_delta` (`stop_reason` "end_turn" or "max_tokens", output usage) and `message_stop`. A mid-stream failure
is an `error` event of type `overloaded_error`, the usual one under load.

A tool call (`llm_locust.sim.apis.tools`; `tools` of `{"name", "input_schema"}`) is a `tool_use` content block:
`content_block_start` with its `id`, `name` and `input: {}`, one `content_block_delta` / `input_json_delta` per
piece of its arguments (`partial_json`), `content_block_stop`, then `message_delta` with stop_reason "tool_use".
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.tools import ToolForm, tool_fields, typed_ids
from llm_locust.sim.apis.wire import (
    Api,
    ApiError,
    CompletionSpec,
    History,
    ScriptedPieces,
    completion_spec,
    messages_prompt,
    optional_int,
    output_text,
    prompt_of,
    typed_event,
)
from llm_locust.sim.words import WORDS


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a Messages request `data` (ApiError if it is unacceptable)."""
    prompt_tokens, prompt_text = messages_prompt(data)
    system = data.get("system")
    if system is not None:
        prompt_tokens += prompt_of([{"content": system}])[0]
    if "max_tokens" not in data:
        raise ApiError(400, "invalid_request_error", "max_tokens: Field required")
    max_tokens = optional_int(data, "max_tokens")
    fields = tool_fields(data, TOOLS)
    return completion_spec(data, prompt_tokens, prompt_text, max_tokens, natural_tokens, **fields)


def _function(item: dict[str, Any]) -> tuple[Any, Any] | None:
    """A client tool's name and `input_schema`; None for a server tool (it has a `type` instead)."""
    return (item.get("name"), item.get("input_schema")) if "input_schema" in item else None


_CHOICES = {"auto": "auto", "none": "none", "any": "required", "tool": "named"}


def _choice(choice: Any) -> tuple[str | None, Any]:
    """A Messages `tool_choice`: `{"type": "auto" | "none" | "any" (required) | "tool" (named, its "name")}`."""
    if not isinstance(choice, dict):
        return None, None
    return _CHOICES.get(choice.get("type")), choice.get("name")  # type: ignore[arg-type]


def _history(data: dict[str, Any]) -> History:
    """The `tool_use` blocks' `id` and the `tool_result` blocks' `tool_use_id`, and the number of messages."""
    messages = data.get("messages") or []
    blocks = [block for message in messages if isinstance(message.get("content"), list) for block in message["content"]]
    return History(tuple(typed_ids(blocks, "tool_use", "id")), tuple(typed_ids(blocks, "tool_result", "tool_use_id")),
                   len(messages))  # fmt: skip


TOOLS = ToolForm(_function, _choice, _history)
"""The Messages API's client tools, its `tool_choice` and its history."""


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
        return {"length": "max_tokens", "tool_calls": "tool_use"}.get(self.spec.finish_reason, "end_turn")

    def start_events(self) -> bytes:
        """Return the events sent with the response head: message_start (input usage), content_block_start, ping."""
        message = {"id": self._id, "type": "message", "role": "assistant", "content": [], "model": self._model,
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": self.spec.prompt_tokens, "output_tokens": 1}}  # fmt: skip
        return (
            typed_event("message_start", {"message": message})
            + typed_event("content_block_start", {"index": 0, "content_block": self._block_start()})
            + typed_event("ping", {})
        )

    def _block_start(self) -> dict[str, Any]:
        """The content block as `content_block_start` opens it: empty text."""
        return {"type": "text", "text": ""}

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s `content_block_delta` as (shared prefix, tail)."""
        return self._TOKEN_PREFIX, self._tails[(self._offset + index) % len(self._tails)]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one delta event carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        return self.text_event(self._text(start, stop))

    def _text(self, start: int, stop: int) -> str:
        """The text of tokens `start` .. `stop - 1`."""
        return "".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop))

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
            "content": [self._block()],
            "stop_reason": self._stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens},
        })  # fmt: skip

    def _block(self) -> dict[str, Any]:
        """The non-streamed response's content block: the whole text."""
        return {"type": "text", "text": output_text(self.spec, self._offset)}


class MessagesToolEncoder(MessagesEncoder):
    """The events of one Messages response answering with the spec's tool call (see the module docstring); each
    event is encoded when written (a tool call is short)."""

    __slots__ = ()

    def _block_start(self) -> dict[str, Any]:
        """The `tool_use` block as `content_block_start` opens it: its id, its name, `input: {}`."""
        call = self.spec.tool_call
        assert call is not None
        return {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return the `input_json_delta` of the call's piece `index` as (empty prefix, event)."""
        return b"", self.tokens_event(index, index + 1)

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one `input_json_delta` carrying pieces `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        call = self.spec.tool_call
        assert call is not None
        return self.text_event("".join(call.pieces[start:stop]))

    def text_event(self, text: str) -> bytes:
        """Return an `input_json_delta` carrying `text` as its `partial_json`."""
        delta = {"type": "input_json_delta", "partial_json": text}
        return typed_event("content_block_delta", {"index": 0, "delta": delta})

    def _block(self) -> dict[str, Any]:
        """The non-streamed response's `tool_use` block, its `input` the arguments' object (the raw text when they
        are not valid JSON: malformed or cut short)."""
        call = self.spec.tool_call
        assert call is not None
        arguments = "".join(call.pieces)
        try:
            tool_input = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            tool_input = arguments
        return {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input}


class MessagesAnswerEncoder(ScriptedPieces, MessagesEncoder):
    """The events of one Messages response carrying the spec's answer (`llm_locust.sim.answers`)."""

    __slots__ = ()


API = Api(
    name="messages",
    paths=("/v1/messages",),
    id_prefix="msg",
    parse=parse,
    encoder=MessagesEncoder,
    tool_encoder=MessagesToolEncoder,
    tool_call_prefix="toolu_",
    answer_encoder=MessagesAnswerEncoder,
)
