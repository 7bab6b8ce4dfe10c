"""Amazon Bedrock's ConverseStream API (`POST /model/{modelId}/converse-stream`): its request and its event-stream
messages.

The request names its model in the path (a `model` field in the body is refused, as Bedrock refuses every field it
does not know); its body holds `messages` (each `{"role", "content": [{"text"}, ...]}`), `system` (a list of
`{"text"}` blocks) and `inferenceConfig.maxTokens`. The answer is `application/vnd.amazon.eventstream`: one binary
message per event (`message`: prelude, headers, JSON payload, CRC32s), each with the headers `:event-type`,
`:content-type` and `:message-type` "event" — what Bedrock sends: `messageStart`, one `contentBlockDelta` per token
(`delta.text`, with Bedrock's padding field `p`), `contentBlockStop`, `messageStop` (`stopReason` "end_turn" or
"max_tokens") and `metadata` (`usage.inputTokens`, `outputTokens`, `totalTokens`; `metrics.latencyMs`). A mid-stream
failure is a message of type `exception` (`:exception-type` modelStreamErrorException).
"""

from __future__ import annotations

import struct
from typing import Any
from zlib import crc32

import orjson

from llm_locust.sim.apis.wire import (
    Api,
    CompletionSpec,
    bad_request,
    completion_spec,
    messages_prompt,
    optional_int,
    output_text,
    prompt_of,
)
from llm_locust.sim.words import WORDS

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_FIELDS = {"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig", "additionalModelRequestFields",
           "promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig"}  # fmt: skip
"""The body fields of a Converse request (the model is in the path)."""
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a ConverseStream request `data` (ApiError if it is unacceptable); always streamed."""
    extraneous = sorted(set(data) - _FIELDS)
    if extraneous:
        raise bad_request(f"Malformed input request: extraneous key [{extraneous[0]}] is not permitted")
    prompt_tokens, prompt_text = messages_prompt(data)
    system = data.get("system")
    if system is not None:
        if not isinstance(system, list):
            raise bad_request("'system' must be a list of content blocks")
        prompt_tokens += prompt_of([{"content": system}])[0]
    config = data.get("inferenceConfig") or {}
    if not isinstance(config, dict):
        raise bad_request("'inferenceConfig' must be an object")
    max_tokens = optional_int(config, "maxTokens")
    return completion_spec({"stream": True}, prompt_tokens, prompt_text, max_tokens, natural_tokens)


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message of string `headers` and `payload`: prelude (total length, headers length, CRC32),
    headers (name length, name, type 7 = string, value length, value), payload, CRC32 of all before it."""
    header_bytes = b"".join(
        struct.pack(">B", len(name)) + name.encode() + struct.pack(">BH", 7, len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 16 + len(header_bytes) + len(payload), len(header_bytes))
    prelude += struct.pack(">I", crc32(prelude))
    body = prelude + header_bytes + payload
    return body + struct.pack(">I", crc32(body))


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """One `event` message of type `kind` with the JSON `payload`."""
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return message(headers, orjson.dumps(payload))


def exception(kind: str, text: str) -> bytes:
    """One `exception` message of type `kind` (e.g. modelStreamErrorException) saying `text`."""
    headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
    return message(headers, orjson.dumps({"message": text}))


def _delta(text: str) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}, "p": _PADDING[: len(text) % 7]})


_TOKEN_EVENTS = tuple(_delta(word) for word in WORDS)
"""Each word's `contentBlockDelta` message, encoded once (its CRC32s are the message's own)."""


class ConverseEncoder:
    """The event-stream messages of one ConverseStream response (see the module docstring)."""

    __slots__ = ("_offset", "spec")

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._offset = offset

    @property
    def _stop_reason(self) -> str:
        return "max_tokens" if self.spec.finish_reason == "length" else "end_turn"

    def start_events(self) -> bytes:
        """The `messageStart` message, sent with the response head."""
        return event("messageStart", {"role": "assistant"})

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Token `index`'s `contentBlockDelta` as (empty prefix, the whole message)."""
        return b"", _TOKEN_EVENTS[(self._offset + index) % len(_TOKEN_EVENTS)]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """One `contentBlockDelta` carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        return self.text_event("".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop)))

    def text_event(self, text: str) -> bytes:
        """A `contentBlockDelta` carrying `text`."""
        return _delta(text)

    def end_events(self) -> list[bytes]:
        """`contentBlockStop`, `messageStop` (stop reason) and `metadata` (usage), after the last token."""
        spec = self.spec
        usage = {"inputTokens": spec.prompt_tokens, "outputTokens": spec.output_tokens,
                 "totalTokens": spec.prompt_tokens + spec.output_tokens}  # fmt: skip
        return [
            event("contentBlockStop", {"contentBlockIndex": 0}),
            event("messageStop", {"stopReason": self._stop_reason}),
            event("metadata", {"usage": usage, "metrics": {"latencyMs": 0}}),
        ]

    def error_event(self, message: str) -> bytes:
        """A `modelStreamErrorException` (a mid-stream failure)."""
        return exception("modelStreamErrorException", message)

    def body(self) -> bytes:
        """The Converse (not streamed) response JSON."""
        spec = self.spec
        text = output_text(spec, self._offset)
        return orjson.dumps({
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": self._stop_reason,
            "usage": {"inputTokens": spec.prompt_tokens, "outputTokens": spec.output_tokens,
                      "totalTokens": spec.prompt_tokens + spec.output_tokens},
            "metrics": {"latencyMs": 0},
        })  # fmt: skip


API = Api(
    name="converse",
    paths=("/model/{model}/converse-stream",),
    id_prefix="converse",
    parse=parse,
    encoder=ConverseEncoder,
    content_type=CONTENT_TYPE,
    request_id_header="x-amzn-RequestId",
)
