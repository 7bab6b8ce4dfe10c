"""What every API the simulator serves shares: the request's JSON and model check, the output length rules, the
prompt word counts, the error body, and the `Api` entry each API module declares.

Prompt tokens are approximated as the number of whitespace-separated words in every message's text (or in the
prompt, the input, the system field), at least 1, tool calls and tool results carried back included
(`message_texts`); a prompt given as token ids counts one token per id.

Output length n: with `ignore_eos`, the request's maximum (or the server's natural length when absent); otherwise
min(maximum, natural length), raised to `min_tokens`. finish_reason is "length" when n reached the maximum, else
"stop".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from llm_locust.sim.words import WORDS

ToolChoice = Literal["auto", "none", "required"]
OutputFormat = Callable[[dict[str, Any]], tuple[str, Any] | None]
"""How an API's request asks for a structured output: ("json_schema", schema), ("json_object", None), or None when
it asks for none (`Api.output_format`, read by `llm_locust.sim.answers`)."""


class ApiError(Exception):
    """An OpenAI-style error response: HTTP `status`, error `type` and `message`."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message

    def body(self) -> bytes:
        """Return the JSON body, shaped like vLLM's: {"error": {"message", "type", "code"}}."""
        return orjson.dumps({"error": {"message": self.message, "type": self.type, "code": self.status}})

    def headers(self) -> tuple[str, ...]:
        """Header lines the response carries besides the body's (none)."""
        return ()


def bad_request(message: str) -> ApiError:
    """Return a 400 BadRequestError."""
    return ApiError(400, "BadRequestError", message)


@dataclass(frozen=True, slots=True)
class Tool:
    """One function tool a request offers: its `name` and its parameters' JSON-schema `properties` (may be empty)."""

    name: str
    properties: dict[str, Any]


@dataclass(frozen=True, slots=True)
class History:
    """What a request carries of earlier tool calls: the ids of the calls its history holds (chat: the assistant's
    `tool_calls`; Responses: `function_call` items' `call_id`; Messages: `tool_use` blocks), the ids whose results it
    carries back (chat: `role: "tool"` messages' `tool_call_id`; Responses: `function_call_output` items' `call_id`;
    Messages: `tool_result` blocks' `tool_use_id`), and its number of messages (Responses: input items; a string
    input is 1)."""

    calls: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    messages: int = 0


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The tool call a response carries: its `id`, the tool's `name`, the whole `arguments` text and its `pieces`
    (one per output token; their concatenation is the arguments when the call was not cut short)."""

    id: str
    name: str
    arguments: str
    pieces: tuple[str, ...]
    malformed: bool

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form served by /sim/trace (the arguments as sent: cut short when the response was)."""
        return {"id": self.id, "name": self.name, "arguments": "".join(self.pieces), "malformed": self.malformed}


@dataclass(frozen=True, slots=True)
class CompletionSpec:
    """What a valid completion request asks for, after applying the length rules."""

    stream: bool
    include_usage: bool
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    prompt_text: str = ""
    """The prompt's text (chat: the messages' text joined by spaces), for the prefix cache."""
    inputs: int = 1  # embeddings: the inputs to embed
    model: str = ""  # the served model it names (`decode_request`)
    max_tokens: int | None = None
    """The request's maximum output length (None: none)."""
    tools: tuple[Tool, ...] = ()
    """The function tools a tool call may name: those the request offers, or the one its `tool_choice` names (read by
    `llm_locust.sim.apis.tools`)."""
    tool_choice: ToolChoice = "auto"
    """Whether the answer may ("auto": with `--tool-call-rate`), must not or must be a tool call."""
    history: History | None = None
    """What the request carries of earlier tool calls, and its number of messages (chat, Responses, Messages)."""
    tool_call: ToolCall | None = None
    """The tool call the response carries instead of text (its pieces are the output tokens), else None."""
    answer: Scripted | None = None
    """The answer the response carries instead of the usual words (`llm_locust.sim.answers`: its pieces are the output
    tokens), else None."""
    endpoint: str = ""
    """The name of the API it was sent to (`Api.name`, set by `apis.parse_request`)."""


class Scripted(Protocol):
    """A response's own text (`llm_locust.sim.answers.Answer`): its `pieces`, one per output token, known once
    `settle` was called with the running batch the request was admitted into."""

    pieces: tuple[str, ...]
    kind: str | None

    def settle(self, batch: int) -> None: ...

    def to_dict(self) -> dict[str, Any]: ...


class ScriptedPieces:
    """An encoder's part for a response carrying `spec.answer`: each token's text is the answer's piece, its event
    encoded when written (an answer is short); the subclass's `tokens_event` builds the event from `_text`."""

    __slots__ = ()

    spec: CompletionSpec

    def _text(self, start: int, stop: int) -> str:
        """The text of tokens `start` .. `stop - 1`: the answer's pieces."""
        return "".join(self.spec.answer.pieces[start:stop])  # type: ignore[union-attr]

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s event as (empty prefix, event)."""
        return b"", self.tokens_event(index, index + 1)  # type: ignore[attr-defined]  # the encoder's own


class Encoder(Protocol):
    """The events and the body of one response, per API. Token events are built from pre-encoded pieces."""

    spec: CompletionSpec

    def start_events(self) -> bytes:
        """The events sent with the streamed response's head."""

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Token `index`'s event as (shared prefix, tail); their concatenation is the event."""

    def tokens_event(self, start: int, stop: int) -> bytes:
        """One event carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""

    def text_event(self, text: str) -> bytes:
        """A token event carrying `text` (built per call: for rare events only)."""

    def end_events(self) -> list[bytes]:
        """The events after the last token."""

    def error_event(self, message: str) -> bytes:
        """The event of a mid-stream failure."""

    def body(self) -> bytes:
        """The whole non-streamed response body."""


def json_object(body: bytes, content_type: str) -> dict[str, Any]:
    """A JSON request body's object (`Api.decode` of the JSON APIs; `content_type` is not read, as vLLM's is not);
    ApiError unless it is one."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad_request("request body must be a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class Api:
    """One API the simulator serves, declared by its module as `API` (`llm_locust.sim.apis` registers it).

    `name`: the endpoint's name (the trace's `endpoint`; the client's API of the same name). `paths`: where it is
    served (`apis.route`), its own first (OpenAI's, or its one provider's); a `{model}` in one is the model's place (a
    body may not name one then), any other `{...}` one path segment. `query`: a parameter its requests' query must
    carry (Gemini's `alt=sse`), else HTTP 400. `id_prefix`: its response ids'. `parse`: its request parser (the
    request's JSON object, the server's natural output length → spec; raises `ApiError`). `encoder`: (spec, response
    id, created s, model, first word's offset) → `Encoder`. An API that can answer with a tool call has `tool_encoder`
    (same arguments, the spec carrying the call) and `tool_call_prefix`, its call ids' prefix. `content_type`: its
    streamed responses' (`stream_content_type`, when given: each stream's, as its spec says — text to speech
    streams SSE events or the audio's own bytes); `request_id_header`: the response header naming the request (its
    trace id), for an API whose stream carries no id (Bedrock's `x-amzn-RequestId`). An API that can answer a question
    or a structured output (`llm_locust.sim.answers`) has `answer_encoder` (the spec carrying the answer) and
    `output_format`, how its request asks for a structured output. `decode`: how its request body (and its
    Content-Type) becomes its fields — a JSON object (`json_object`), or a multipart form (`forms.multipart_form`). An
    API served over WebSocket has `websocket`: (the upgraded connection, `sim.websocket.ApiSocket`) → its session,
    which the connection's text messages go to (its paths answer a GET with `Upgrade: websocket`, nothing else).
    `serves_too`: the names of the APIs it also serves at a path they share — that path routes to it, whose session
    tells them apart (vLLM's realtime transcription at the OpenAI Realtime API's `/v1/realtime`)."""

    name: str
    paths: tuple[str, ...]
    id_prefix: str
    parse: Callable[[dict[str, Any], int], CompletionSpec]
    encoder: Callable[[CompletionSpec, str, int, str, int], Encoder]
    tool_encoder: Callable[[CompletionSpec, str, int, str, int], Encoder] | None = None
    tool_call_prefix: str = "call_"
    content_type: str = "text/event-stream"
    stream_content_type: Callable[[CompletionSpec], str] | None = None
    request_id_header: str = ""
    answer_encoder: Callable[[CompletionSpec, str, int, str, int], Encoder] | None = None
    output_format: OutputFormat | None = None
    query: str = ""
    decode: Callable[[bytes, str], dict[str, Any]] = json_object
    websocket: Callable[[Any], Any] | None = None
    serves_too: tuple[str, ...] = ()


def decode_request(data: dict[str, Any], models: tuple[str, ...], path_model: str | None = None) -> dict[str, Any]:
    """The request's fields `data` (its body decoded by its API, `Api.decode`), its "model" set (the first of `models`
    when it names none; left out when the path names it, `path_model`: the API's own parse refuses a body naming one,
    as the cloud does); ApiError unless it names one of `models`."""
    requested = data.setdefault("model", models[0]) if path_model is None else path_model
    if requested not in models:
        raise ApiError(404, "NotFoundError", f"The model `{requested}` does not exist.")
    return data


def completion_spec(
    data: dict[str, Any],
    prompt_tokens: int,
    prompt_text: str,
    max_tokens: int | None,
    natural_tokens: int,
    **tool_fields: Any,
) -> CompletionSpec:
    """The spec of a generating request `data` whose prompt is `prompt_tokens` words of `prompt_text`, asking for at
    most `max_tokens` (None: no maximum), under the length rules of the module docstring; `tool_fields`: its `tools`,
    `tool_choice` and `history` (`llm_locust.sim.apis.tools.tool_fields`)."""
    min_tokens = optional_int(data, "min_tokens") or 0
    if max_tokens is not None and max_tokens < 1:
        raise bad_request(f"max_tokens must be at least 1, got {max_tokens}")
    if min_tokens < 0 or (max_tokens is not None and min_tokens > max_tokens):
        raise bad_request(f"min_tokens must be between 0 and max_tokens, got {min_tokens}")
    n = output_length(data, max_tokens, natural_tokens)
    stream_options = data.get("stream_options") or {}
    return CompletionSpec(
        stream=bool(data.get("stream")),
        include_usage=isinstance(stream_options, dict) and bool(stream_options.get("include_usage")),
        prompt_tokens=max(prompt_tokens, 1),
        output_tokens=n,
        finish_reason="length" if n == max_tokens else "stop",
        prompt_text=prompt_text,
        max_tokens=max_tokens,
        **tool_fields,
    )


def output_length(data: dict[str, Any], max_tokens: int | None, natural_tokens: int) -> int:
    """The output tokens of request `data` (already validated) whose answer is naturally `natural_tokens` long, under
    the length rules of the module docstring: with `ignore_eos` its maximum (`max_tokens`; None: the natural length),
    else the natural length cut to the maximum and raised to `min_tokens`; at least 1."""
    if data.get("ignore_eos"):
        n = natural_tokens if max_tokens is None else max_tokens
    else:
        n = max(min(natural_tokens, max_tokens or natural_tokens), optional_int(data, "min_tokens") or 0)
    return max(n, 1)


def optional_int(data: dict[str, Any], key: str) -> int | None:
    """`data[key]`: None when absent, an int, or ApiError."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{key}' must be an integer, got {value!r}")
    return value


def messages_prompt(data: dict[str, Any]) -> tuple[int, str]:
    """The words and the text of a request's non-empty `messages` list (chat, Messages); ApiError otherwise."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list")
    return prompt_of(messages)


def prompt_of(messages: list[Any]) -> tuple[int, str]:
    """The words and the text (their texts, `message_texts`, joined by spaces) of `messages` (or Responses input
    items); ApiError unless each is an object."""
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            raise bad_request("each message must be an object")
        texts += message_texts(message)
    text = " ".join(texts)
    return len(text.split()), text


def message_texts(message: dict[str, Any]) -> list[str]:
    """The texts of a message (or of a Responses input item) that a server's template puts in the prompt: its string
    content or its content parts' `text`, and what a tool-using conversation carries — a chat assistant message's
    `tool_calls` arguments, a Messages `tool_use` block's `input` (as JSON) and `tool_result` block's content, a
    Responses `function_call` item's `arguments` and `function_call_output` item's `output`."""
    content = message.get("content")
    if isinstance(content, str):
        texts = [content]
    else:
        texts = []
        for part in content if isinstance(content, list) else ():
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "tool_result":
                texts += message_texts(part)
            elif part.get("type") == "tool_use":
                texts.append(json.dumps(part.get("input")))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            texts.append(function["arguments"])
    texts += [message[key] for key in ("arguments", "output") if isinstance(message.get(key), str)]
    return texts


def prompt_words(prompt: Any) -> int:
    """The words of a text prompt (a string, or a list of strings and token ids: one token per id)."""
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list):
        return sum(prompt_words(item) if not isinstance(item, int) else 1 for item in prompt)
    raise bad_request("'prompt' must be a string, a list of strings or a list of token ids")


def output_text(spec: CompletionSpec, offset: int) -> str:
    """The whole text a response of `spec` generates: its answer's (`spec.answer`), else words from `offset` on."""
    if spec.answer is not None:
        return "".join(spec.answer.pieces)
    return "".join(WORDS[(offset + i) % len(WORDS)] for i in range(spec.output_tokens))


def usage(spec: CompletionSpec) -> dict[str, int]:
    """Return the OpenAI usage object for a fully generated response."""
    return {
        "prompt_tokens": spec.prompt_tokens,
        "completion_tokens": spec.output_tokens,
        "total_tokens": spec.prompt_tokens + spec.output_tokens,
    }


def typed_event(kind: str, data: dict[str, Any]) -> bytes:
    """One whole typed SSE event (Responses, Messages): `event: <kind>` and its JSON data of the same type."""
    return b"event: %b\ndata: %b\n\n" % (kind.encode(), orjson.dumps({"type": kind, **data}))


def models_body(models: tuple[str, ...], created_s: int) -> bytes:
    """Return the GET /v1/models list: the base model, then its adapters (with vLLM's `root` and `parent`: the base)."""
    base = models[0]
    cards = [{"id": base, "object": "model", "created": created_s, "owned_by": "llm-locust", "root": base}]
    cards += [
        {"id": name, "object": "model", "created": created_s, "owned_by": "llm-locust", "root": name, "parent": base}
        for name in models[1:]
    ]
    return orjson.dumps({"object": "list", "data": cards})
