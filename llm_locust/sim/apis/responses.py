"""The OpenAI Responses API (`POST /v1/responses`): its request and its typed events.

The request's `input` (a string or a list of messages) and `max_output_tokens`. Each event is `event: <type>` plus
`data: <JSON with the same type>`; token events are built from pre-encoded pieces (no JSON encoding per token), as
for chat. What OpenAI's API sends: `response.created`, `response.in_progress`, `response.output_item.added`,
`response.content_part.added`, one `response.output_text.delta` per token, then `response.output_text.done`,
`response.content_part.done`, `response.output_item.done` and `response.completed` — or `response.incomplete`
with `incomplete_details.reason` "max_output_tokens" when the output reached `max_output_tokens` — carrying
`usage`. A mid-stream failure is `response.failed` with `response.error`.

A tool call (`llm_locust.sim.apis.tools`; `tools` of `{"type": "function", "name", "parameters"}`) is a
`function_call` output item (`id`, `call_id`, `name`, `arguments`): `response.output_item.added` with the start
events, one `response.function_call_arguments.delta` per piece of its arguments, then
`response.function_call_arguments.done`, `response.output_item.done` and `response.completed`.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.tools import ToolForm, openai_choice, tool_fields, typed_ids
from llm_locust.sim.apis.wire import (
    Api,
    CompletionSpec,
    History,
    ScriptedPieces,
    bad_request,
    completion_spec,
    optional_int,
    output_text,
    prompt_of,
    prompt_words,
    typed_event,
)
from llm_locust.sim.words import WORDS


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a Responses request `data` (ApiError if it is unacceptable)."""
    if "input" not in data:
        raise bad_request("'input' is required")
    item = data["input"]
    if isinstance(item, str):
        prompt_tokens, prompt_text = prompt_words(item), item
    else:
        messages = _messages(item)
        prompt_tokens, prompt_text = prompt_of(messages)
    max_tokens = optional_int(data, "max_output_tokens")
    fields = tool_fields(data, TOOLS)
    return completion_spec(data, prompt_tokens, prompt_text, max_tokens, natural_tokens, **fields)


def _function(item: dict[str, Any]) -> tuple[Any, Any] | None:
    """A Responses tool's name and parameters: `{"type": "function", name, parameters}`; None for a built-in tool."""
    return (item.get("name"), item.get("parameters")) if item.get("type") == "function" else None


def _history(data: dict[str, Any]) -> History:
    """The `function_call` input items' and the `function_call_output` items' `call_id`, and the number of input
    items (a string input is 1)."""
    items = data.get("input")
    if not isinstance(items, list):
        return History(messages=1)
    calls = tuple(typed_ids(items, "function_call", "call_id"))
    return History(calls, tuple(typed_ids(items, "function_call_output", "call_id")), len(items))


TOOLS = ToolForm(_function, lambda choice: openai_choice(choice, lambda named: named), _history)
"""The Responses API's tools, its `tool_choice` (a named one: `{"type": "function", "name"}`) and its history."""


def requested_format(data: dict[str, Any]) -> tuple[str, Any] | None:
    """The structured output a Responses request asks for in `text.format` (`json_schema`: its `schema`, or
    `json_object`); None for none."""
    text = data.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        return "json_schema", form.get("schema")
    return ("json_object", None) if isinstance(form, dict) and form.get("type") == "json_object" else None


def _messages(value: Any) -> list[Any]:
    """`value` if it is a non-empty list; ApiError otherwise."""
    if not isinstance(value, list) or not value:
        raise bad_request("'input' must be a string or a non-empty list of messages")
    return value


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
            typed_event("response.created", {"sequence_number": 0, "response": self._response})
            + typed_event("response.in_progress", {"sequence_number": 1, "response": self._response})
            + typed_event("response.output_item.added", {"sequence_number": 2, "output_index": 0, "item": item})
            + typed_event("response.content_part.added", {"sequence_number": 3, **where, "part": part})
        )

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s `response.output_text.delta` as (shared prefix, tail)."""
        return self._token_prefix, self._tails[(self._offset + index) % len(self._tails)] + b"%d}\n\n" % (
            self._START + index
        )

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one delta event carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        return (
            self._token_prefix
            + orjson.dumps(self._text(start, stop))
            + b',"logprobs":[],"sequence_number":%d}\n\n' % (self._START + start)
        )

    def _text(self, start: int, stop: int) -> str:
        """The text of tokens `start` .. `stop - 1`."""
        return "".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop))

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
        return [
            typed_event("response.output_text.done", {"sequence_number": sequence, **where, "text": text}),
            typed_event("response.content_part.done", {"sequence_number": sequence + 1, **where, "part": part}),
            *self._item_done(item, sequence + 2),
        ]

    def _item_done(self, item: dict[str, Any], sequence: int) -> list[bytes]:
        """`response.output_item.done` of the one output `item`, then `response.completed` (or
        `response.incomplete`) carrying it and the usage, from sequence number `sequence` on."""
        spec = self.spec
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
            typed_event("response.output_item.done", {"sequence_number": sequence, "output_index": 0, "item": item}),
            typed_event(
                "response.incomplete" if truncated else "response.completed",
                {"sequence_number": sequence + 1, "response": response},
            ),
        ]

    def error_event(self, message: str) -> bytes:
        """Return `response.failed` with a server error (a mid-stream failure)."""
        error = {"code": "server_error", "message": message}
        return typed_event("response.failed", {"sequence_number": 0, "response": {**self._response, "status": "failed",
                                                                            "error": error}})  # fmt: skip

    def body(self) -> bytes:
        """Return the non-streamed response JSON."""
        events = self.end_events()
        return orjson.dumps(orjson.loads(events[-1].split(b"data: ", 1)[1])["response"])


class ResponsesToolEncoder(ResponsesEncoder):
    """The events of one Responses API response answering with the spec's tool call (see the module docstring); each
    event is encoded when written (a tool call is short)."""

    __slots__ = ()

    _START = 3  # sequence numbers 0..2 are the start events

    def _function_call(self, status: str) -> dict[str, Any]:
        """The `function_call` output item, `status` "in_progress" (no arguments yet) or "completed"."""
        call = self.spec.tool_call
        assert call is not None
        arguments = "".join(call.pieces) if status == "completed" else ""
        return {"id": f"fc_{call.id.removeprefix('call_')}", "type": "function_call", "status": status,
                "arguments": arguments, "call_id": call.id, "name": call.name}  # fmt: skip

    def start_events(self) -> bytes:
        """Return the events sent with the response head: created, in progress, the function call item added."""
        item = self._function_call("in_progress")
        return (
            typed_event("response.created", {"sequence_number": 0, "response": self._response})
            + typed_event("response.in_progress", {"sequence_number": 1, "response": self._response})
            + typed_event("response.output_item.added", {"sequence_number": 2, "output_index": 0, "item": item})
        )

    def _delta(self, text: str, sequence: int) -> bytes:
        """A `response.function_call_arguments.delta` event carrying `text`."""
        item_id = self._function_call("in_progress")["id"]
        fields = {"sequence_number": sequence, "item_id": item_id, "output_index": 0, "delta": text}
        return typed_event("response.function_call_arguments.delta", fields)

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return the delta event of the call's piece `index` as (empty prefix, event)."""
        return b"", self.tokens_event(index, index + 1)

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one delta event carrying pieces `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        call = self.spec.tool_call
        assert call is not None
        return self._delta("".join(call.pieces[start:stop]), self._START + start)

    def text_event(self, text: str) -> bytes:
        """Return a delta event carrying `text` (the huge_chunk fault)."""
        return self._delta(text, 0)

    def end_events(self) -> list[bytes]:
        """Return the events after the last piece: arguments done, the item done, `response.completed` (or
        `response.incomplete`)."""
        item = self._function_call("completed")
        sequence = self._START + self.spec.output_tokens
        done = {"sequence_number": sequence, "item_id": item["id"], "output_index": 0, "name": item["name"],
                "arguments": item["arguments"]}  # fmt: skip
        return [typed_event("response.function_call_arguments.done", done), *self._item_done(item, sequence + 1)]


class ResponsesAnswerEncoder(ScriptedPieces, ResponsesEncoder):
    """The events of one Responses API response carrying the spec's answer (`llm_locust.sim.answers`)."""

    __slots__ = ()


API = Api(
    name="responses",
    paths=("/v1/responses",),
    id_prefix="resp",
    parse=parse,
    encoder=ResponsesEncoder,
    tool_encoder=ResponsesToolEncoder,
    answer_encoder=ResponsesAnswerEncoder,
    output_format=requested_format,
)
