"""The text completions API (`POST /v1/completions`): its request and its `text_completion` chunks.

The request's `prompt` (a string, a list of strings or token ids) and `max_tokens`. Each streamed token is one
`data: {"object": "text_completion", "choices": [{"text": ...}]}` event (the last carries finish_reason), then the
usage event with `stream_options.include_usage` and `data: [DONE]`. Chat's chunks (`chat.py`) are these with a delta. A
response carrying an answer (`llm_locust.sim.answers`) has the answer's pieces as its tokens.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.wire import (
    Api,
    CompletionSpec,
    ScriptedPieces,
    bad_request,
    completion_spec,
    optional_int,
    output_text,
    prompt_words,
    usage,
)
from llm_locust.sim.words import WORDS

DONE_EVENT = b"data: [DONE]\n\n"
MALFORMED_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"trunc\n\n'
"""A token event whose JSON is cut short (the `bad_json` fault)."""
OPEN_CHOICE_TAIL = b',"logprobs":null,"finish_reason":null}]}\n\n'


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a text completion request `data` (ApiError if it is unacceptable)."""
    if "prompt" not in data:
        raise bad_request("'prompt' is required")
    prompt = data["prompt"]
    max_tokens = optional_int(data, "max_tokens")
    text = prompt if isinstance(prompt, str) else ""
    return completion_spec(data, prompt_words(prompt), text, max_tokens, natural_tokens)


def response_format(data: dict[str, Any]) -> tuple[str, Any] | None:
    """The structured output OpenAI's `response_format` asks for (chat's and text completions'): `json_schema`
    (`json_schema.schema`), TGI's `{"type": "json", "value": schema}` or `json_object`; None for none."""
    form = data.get("response_format")
    if isinstance(form, dict):
        kind = form.get("type")
        if kind == "json_schema":
            inner = form.get("json_schema")
            return "json_schema", inner.get("schema") if isinstance(inner, dict) else None
        if kind == "json":
            return "json_schema", form.get("value")
        if kind == "json_object":
            return "json_object", None
    return None


def requested_format(data: dict[str, Any]) -> tuple[str, Any] | None:
    """The structured output a text completion request asks for: `response_format`, vLLM's `structured_outputs`
    (`json`, `json_object`), or SGLang's / llama.cpp's `json_schema` (a JSON string or an object); None for none."""
    asked = response_format(data)
    if asked is not None:
        return asked
    outputs = data.get("structured_outputs")
    if isinstance(outputs, dict) and "json" in outputs:
        schema = outputs["json"]
        return "json_schema", orjson.loads(schema) if isinstance(schema, str) else schema
    if isinstance(outputs, dict) and outputs.get("json_object"):
        return "json_object", None
    schema = data.get("json_schema")
    if schema is not None:
        return "json_schema", orjson.loads(schema) if isinstance(schema, str) else schema
    return None


class ChunkEncoder:
    """The `data: {...}` chunks of one text completion; token events are built from pre-encoded pieces.

    `token_event(i)` is the i-th token's `data: {...}\\n\\n` (the last one carries finish_reason); no JSON encoding
    happens per token. Subclasses (chat) change the object name, the token's wrapping and the start events.
    """

    __slots__ = ("_created_s", "_head", "_id", "_last_index", "_last_tail", "_model", "_offset", "_token_prefix",
                 "spec")  # fmt: skip

    OBJECT = b"text_completion"  # the streamed chunks'
    BODY_OBJECT = "text_completion"  # the non-streamed response's
    TOKEN_OPEN = b',"choices":[{"index":0,"text":'
    CLOSING = b""  # what closes the token's wrapping (chat: its delta object)
    TAILS = tuple(orjson.dumps(word) + OPEN_CHOICE_TAIL for word in WORDS)

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._id = response_id
        self._created_s = created_s
        self._model = model
        self._offset = offset
        self._head = b'data: {"id":"%s","object":"%s","created":%d,"model":%s' % (
            response_id.encode(),
            self.OBJECT,
            created_s,
            orjson.dumps(model),
        )
        self._token_prefix = self._head + self.TOKEN_OPEN
        self._last_index = spec.output_tokens - 1
        last_word = WORDS[(offset + self._last_index) % len(WORDS)]
        self._last_tail = b'%b%b,"logprobs":null,"finish_reason":"%b"}]}\n\n' % (
            orjson.dumps(last_word),
            self.CLOSING,
            spec.finish_reason.encode(),
        )

    def start_events(self) -> bytes:
        """Return the events sent with the response head: none for text completions."""
        return b""

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
        return self._token_prefix, self.TAILS[(self._offset + index) % len(self.TAILS)]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one event carrying tokens `start` .. `stop - 1` (with the finish_reason when it holds the last)."""
        text = orjson.dumps(self._text(start, stop))
        if stop - 1 == self._last_index:
            tail = b'%b,"logprobs":null,"finish_reason":"%b"}]}\n\n' % (self.CLOSING, self.spec.finish_reason.encode())
        else:
            tail = self.CLOSING + OPEN_CHOICE_TAIL
        return self._token_prefix + text + tail

    def _text(self, start: int, stop: int) -> str:
        """The text of tokens `start` .. `stop - 1`."""
        return "".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop))

    def text_event(self, text: str) -> bytes:
        """Return a token event carrying `text` (a whole event, built per call: for rare events only)."""
        return self._token_prefix + orjson.dumps(text) + self.CLOSING + OPEN_CHOICE_TAIL

    def usage_event(self) -> bytes:
        """Return the usage-only event (`"choices": []`) sent when include_usage is set."""
        return self._head + b',"choices":[],"usage":%b}\n\n' % orjson.dumps(usage(self.spec))

    def choice(self, text: str) -> dict[str, Any]:
        """The non-streamed response's one choice, carrying the whole `text`."""
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": self.spec.finish_reason}

    def body(self) -> bytes:
        """Return the non-streamed response JSON (`text_completion`; chat: `chat.completion`)."""
        spec = self.spec
        return orjson.dumps(
            {
                "id": self._id,
                "object": self.BODY_OBJECT,
                "created": self._created_s,
                "model": self._model,
                "choices": [self.choice(output_text(spec, self._offset))],
                "usage": usage(spec),
            }
        )


class ChunkAnswerEncoder(ScriptedPieces, ChunkEncoder):
    """The chunks of one text completion carrying the spec's answer (`llm_locust.sim.answers`)."""

    __slots__ = ()


API = Api(
    name="completions",
    paths=("/v1/completions", "/openai/deployments/{deployment}/completions"),  # OpenAI's, Azure OpenAI's
    id_prefix="cmpl",
    parse=parse,
    encoder=ChunkEncoder,
    answer_encoder=ChunkAnswerEncoder,
    output_format=requested_format,
)
