"""The OpenAI wire format: request validation, pre-encoded stream events, response bodies, errors.

`parse_completion` validates the request of every endpoint the simulator serves (chat, text completions, the
Responses API's `input` and `max_output_tokens`, the Anthropic Messages API's `messages`, `system` and required
`max_tokens`, embeddings' `input`); the Responses and Messages events are `typed_events`'.

Prompt tokens are approximated as the number of whitespace-separated words in every message's
text (or in the prompt, the input, the system field), at least 1; a prompt given as token ids counts one token per
id. An embeddings request "generates" one token: the moment its vectors are ready (after the prefill).

Output length n: with `ignore_eos`, `max_tokens` (or the server's natural length when absent);
otherwise min(max_tokens, natural length), raised to `min_tokens`. finish_reason is "length"
when n reached max_tokens, else "stop".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from llm_locust.sim.words import WORDS

Endpoint = Literal["chat", "completions", "responses", "messages", "embeddings"]


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


def bad_request(message: str) -> ApiError:
    """Return a 400 BadRequestError."""
    return ApiError(400, "BadRequestError", message)


@dataclass(frozen=True, slots=True)
class CompletionSpec:
    """What a valid completion request asks for, after applying the length rules."""

    endpoint: Endpoint
    stream: bool
    include_usage: bool
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    prompt_text: str = ""
    """The prompt's text (chat: the messages' text joined by spaces), for the prefix cache."""
    inputs: int = 1  # embeddings: the inputs to embed


def parse_completion(body: bytes, endpoint: Endpoint, model: str, natural_tokens: int) -> CompletionSpec:
    """Validate a request body for `endpoint`; raise ApiError (400 / 404) if it is unacceptable."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad_request("request body must be a JSON object")
    requested = data.get("model", model)
    if requested != model:
        raise ApiError(404, "NotFoundError", f"The model `{requested}` does not exist.")
    if endpoint == "embeddings":
        return _embeddings(data)
    if endpoint in ("chat", "messages"):
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise bad_request("'messages' must be a non-empty list")
        prompt_tokens = sum(_message_words(message) for message in messages)
        prompt_text = " ".join(_message_text(message) for message in messages)
        if endpoint == "messages":
            prompt_tokens += _system_words(data.get("system"))
            if "max_tokens" not in data:
                raise ApiError(400, "invalid_request_error", "max_tokens: Field required")
    elif endpoint == "responses":
        if "input" not in data:
            raise bad_request("'input' is required")
        item = data["input"]
        prompt_tokens = _prompt_words(item) if isinstance(item, str) else sum(map(_message_words, _list(item)))
        prompt_text = item if isinstance(item, str) else " ".join(map(_message_text, _list(item)))
    else:
        if "prompt" not in data:
            raise bad_request("'prompt' is required")
        prompt_tokens = _prompt_words(data["prompt"])
        prompt_text = data["prompt"] if isinstance(data["prompt"], str) else ""
    max_tokens = _optional_int(data, "max_output_tokens" if endpoint == "responses" else "max_tokens")
    if endpoint == "chat" and max_tokens is None:
        max_tokens = _optional_int(data, "max_completion_tokens")
    min_tokens = _optional_int(data, "min_tokens") or 0
    if max_tokens is not None and max_tokens < 1:
        raise bad_request(f"max_tokens must be at least 1, got {max_tokens}")
    if min_tokens < 0 or (max_tokens is not None and min_tokens > max_tokens):
        raise bad_request(f"min_tokens must be between 0 and max_tokens, got {min_tokens}")
    if data.get("ignore_eos"):
        n = natural_tokens if max_tokens is None else max_tokens
    else:
        n = max(min(natural_tokens, max_tokens or natural_tokens), min_tokens)
    n = max(n, 1)
    stream_options = data.get("stream_options") or {}
    return CompletionSpec(
        endpoint=endpoint,
        stream=bool(data.get("stream")),
        include_usage=isinstance(stream_options, dict) and bool(stream_options.get("include_usage")),
        prompt_tokens=max(prompt_tokens, 1),
        output_tokens=n,
        finish_reason="length" if n == max_tokens else "stop",
        prompt_text=prompt_text,
    )


def _embeddings(data: dict[str, Any]) -> CompletionSpec:
    """An embeddings request: its `input` (a string or a list of strings) and their words."""
    item = data.get("input")
    texts = [item] if isinstance(item, str) else item
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise bad_request("'input' must be a string or a non-empty list of strings")
    words = sum(max(len(text.split()), 1) for text in texts)
    return CompletionSpec("embeddings", False, False, words, 1, "stop", inputs=len(texts))


def _list(value: Any) -> list[Any]:
    """`value` if it is a non-empty list; ApiError otherwise."""
    if not isinstance(value, list) or not value:
        raise bad_request("'input' must be a string or a non-empty list of messages")
    return value


def _system_words(system: Any) -> int:
    """Words of the Messages API's `system` field (a string or a list of text blocks)."""
    if system is None:
        return 0
    return _message_words({"content": system})


def _optional_int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{key}' must be an integer, got {value!r}")
    return value


def _message_words(message: Any) -> int:
    if not isinstance(message, dict):
        raise bad_request("each message must be an object")
    content = message.get("content")
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(
            len(part["text"].split())
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return 0


def _message_text(message: dict[str, Any]) -> str:
    """The text of a (validated) chat message: its string content or its text parts joined by spaces."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else ""


def _prompt_words(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list):
        return sum(_prompt_words(item) if not isinstance(item, int) else 1 for item in prompt)
    raise bad_request("'prompt' must be a string, a list of strings or a list of token ids")


_OPEN_CHOICE_TAIL = b',"logprobs":null,"finish_reason":null}]}\n\n'
_CHAT_WORD_TAILS = tuple(orjson.dumps(word) + b"}" + _OPEN_CHOICE_TAIL for word in WORDS)
_TEXT_WORD_TAILS = tuple(orjson.dumps(word) + _OPEN_CHOICE_TAIL for word in WORDS)


class EventEncoder:
    """SSE event bytes for one response; token events are built from pre-encoded pieces.

    `token_event(i)` is the i-th token's `data: {...}\\n\\n` (the last one carries finish_reason);
    no JSON encoding happens per token.
    """

    __slots__ = ("_closing", "_head", "_last_index", "_last_tail", "_offset", "_tails", "_token_prefix", "spec")

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._offset = offset
        self._head = b'data: {"id":"%s","object":"%s","created":%d,"model":%s' % (
            response_id.encode(),
            b"chat.completion.chunk" if spec.endpoint == "chat" else b"text_completion",
            created_s,
            orjson.dumps(model),
        )
        if spec.endpoint == "chat":
            self._token_prefix = self._head + b',"choices":[{"index":0,"delta":{"content":'
            self._tails = _CHAT_WORD_TAILS
            closing = b"}"
        else:
            self._token_prefix = self._head + b',"choices":[{"index":0,"text":'
            self._tails = _TEXT_WORD_TAILS
            closing = b""
        self._closing = closing
        self._last_index = spec.output_tokens - 1
        last_word = WORDS[(offset + self._last_index) % len(WORDS)]
        self._last_tail = b'%b%b,"logprobs":null,"finish_reason":"%b"}]}\n\n' % (
            orjson.dumps(last_word),
            closing,
            spec.finish_reason.encode(),
        )

    def start_events(self) -> bytes:
        """Return the events sent with the response head: chat's role event,
        `delta: {"role": "assistant", "content": ""}` (nothing for text completions)."""
        if self.spec.endpoint != "chat":
            return b""
        return (
            self._head
            + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
            + b'"logprobs":null,"finish_reason":null}]}\n\n'
        )

    def end_events(self) -> list[bytes]:
        """Return the events after the last token: the usage event (with include_usage) and [DONE]."""
        return [self.usage_event(), DONE_EVENT] if self.spec.include_usage else [DONE_EVENT]

    def error_event(self, message: str) -> bytes:
        """Return the event of a mid-stream failure: an OpenAI/vLLM-style error object."""
        error = {"object": "error", "message": message, "type": "InternalServerError", "code": 500}
        return b"data: " + orjson.dumps({"error": error}) + b"\n\n"

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s event as (shared prefix, tail); their concatenation is the event."""
        if index == self._last_index:
            return self._token_prefix, self._last_tail
        return self._token_prefix, self._tails[(self._offset + index) % len(self._tails)]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one event carrying tokens `start` .. `stop - 1` (with the finish_reason when it holds the last)."""
        offset, count = self._offset, len(WORDS)
        text = orjson.dumps("".join(WORDS[(offset + i) % count] for i in range(start, stop)))
        if stop - 1 == self._last_index:
            tail = b'%b,"logprobs":null,"finish_reason":"%b"}]}\n\n' % (self._closing, self.spec.finish_reason.encode())
        else:
            tail = self._closing + _OPEN_CHOICE_TAIL
        return self._token_prefix + text + tail

    def text_event(self, text: str) -> bytes:
        """Return a token event carrying `text` (a whole event, built per call: for rare events only)."""
        return self._token_prefix + orjson.dumps(text) + self._closing + _OPEN_CHOICE_TAIL

    def usage_event(self) -> bytes:
        """Return the usage-only event (`"choices": []`) sent when include_usage is set."""
        return self._head + b',"choices":[],"usage":%b}\n\n' % orjson.dumps(usage(self.spec))


DONE_EVENT = b"data: [DONE]\n\n"
MALFORMED_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"trunc\n\n'
"""A token event whose JSON is cut short (the `bad_json` fault)."""


def usage(spec: CompletionSpec) -> dict[str, int]:
    """Return the OpenAI usage object for a fully generated response."""
    return {
        "prompt_tokens": spec.prompt_tokens,
        "completion_tokens": spec.output_tokens,
        "total_tokens": spec.prompt_tokens + spec.output_tokens,
    }


def completion_body(spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> bytes:
    """Return the non-streamed response JSON (`chat.completion` or `text_completion`)."""
    text = output_text(spec, offset)
    if spec.endpoint == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": spec.finish_reason,
        }
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": spec.finish_reason}
        kind = "text_completion"
    return orjson.dumps(
        {
            "id": response_id,
            "object": kind,
            "created": created_s,
            "model": model,
            "choices": [choice],
            "usage": usage(spec),
        }
    )


def output_text(spec: CompletionSpec, offset: int) -> str:
    """The whole text a response of `spec` generates (its words start at `offset`)."""
    return "".join(WORDS[(offset + i) % len(WORDS)] for i in range(spec.output_tokens))


def embeddings_body(spec: CompletionSpec, model: str, dimensions: int = 8) -> bytes:
    """Return the embeddings response JSON: one `dimensions`-long vector per input, usage.prompt_tokens."""
    vector = [round(1.0 / (1 + i), 4) for i in range(dimensions)]
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(spec.inputs)]
    usage = {"prompt_tokens": spec.prompt_tokens, "total_tokens": spec.prompt_tokens}
    return orjson.dumps({"object": "list", "data": data, "model": model, "usage": usage})


def models_body(model: str, created_s: int) -> bytes:
    """Return the GET /v1/models list with the one served model."""
    return orjson.dumps(
        {
            "object": "list",
            "data": [{"id": model, "object": "model", "created": created_s, "owned_by": "llm-locust"}],
        }
    )
