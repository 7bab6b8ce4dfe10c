"""Gemini's streamed generation (`POST .../models/{model}:streamGenerateContent?alt=sse`): its request and events.

Served at both of Google's paths (`API.paths`): the Gemini API's `/v1beta/models/{model}:...` and Vertex AI's
`/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:...`. The model is the path's (a body
naming one is refused, as Google refuses any field it does not know: `FIELDS`); `alt=sse` is required (without it
Google streams one JSON array, which this simulator does not speak).

The request's `contents` (each `{role, parts: [{text} | {functionCall} | {functionResponse}]}`), `systemInstruction`
and `generationConfig.maxOutputTokens`. Each event is one `data: <GenerateContentResponse>` ended by a blank line in
CRLF, as Google sends it, and there is no `[DONE]`: one event per token, its text in `candidates[0].content.parts`,
with `modelVersion` and `responseId`; after the last token, an event with an empty text part, `finishReason`
(`STOP`, or `MAX_TOKENS` when the maximum was reached) and `usageMetadata` (`promptTokenCount`,
`candidatesTokenCount`, `totalTokenCount`); then the body ends. A mid-stream failure is an `error` object
(`code` 503, `status` `UNAVAILABLE`: "the model is overloaded").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request, completion_spec, optional_int, output_text
from llm_locust.sim.words import WORDS

FIELDS = frozenset(("contents", "systemInstruction", "generationConfig", "tools", "toolConfig", "safetySettings",
                    "cachedContent", "labels"))  # fmt: skip
"""The request fields Google knows (any other is refused: "Invalid JSON payload received. Unknown name")."""
_END = b"\r\n\r\n"


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a streamGenerateContent request `data` (ApiError if it is unacceptable): always streamed."""
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise bad_request(f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.')
    contents = data.get("contents")
    if not isinstance(contents, list) or not contents:
        raise bad_request("* GenerateContentRequest.contents: contents is not specified")
    texts = [text for content in contents for text in _part_texts(content)]
    system = data.get("systemInstruction")
    if system is not None:
        texts += _part_texts(system)
    text = " ".join(texts)
    config = data.get("generationConfig") or {}
    if not isinstance(config, dict):
        raise bad_request("generationConfig must be an object")
    max_tokens = optional_int(config, "maxOutputTokens")
    spec = completion_spec({}, len(text.split()), text, max_tokens, natural_tokens)
    return replace(spec, stream=True, include_usage=True)


def _part_texts(content: Any) -> list[str]:
    """The texts of a content's parts (`text`, and a function call's arguments or response as JSON); ApiError unless
    it is an object with a list of parts."""
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        raise bad_request("each content must be an object with a list of parts")
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            raise bad_request("each part must be an object")
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        for key, inner in (("functionCall", "args"), ("functionResponse", "response")):
            if isinstance(part.get(key), dict):
                texts.append(orjson.dumps(part[key].get(inner)).decode())
    return texts


class GeminiEncoder:
    """The events of one streamed Gemini response (see the module docstring)."""

    __slots__ = ("_offset", "_tails", "_trailer", "spec")

    _TOKEN_PREFIX = b'data: {"candidates":[{"content":{"parts":[{"text":'

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec = spec
        self._offset = offset
        # what follows a token event's candidate: the model version and the response id
        self._trailer = b',"modelVersion":%b,"responseId":%b}' % (orjson.dumps(model), orjson.dumps(response_id))
        self._tails = tuple(self._tail(orjson.dumps(word)) for word in WORDS)

    def _tail(self, text_json: bytes) -> bytes:
        """A token event after its prefix: the text (JSON) and the rest of the event."""
        return text_json + b'}],"role":"model"},"index":0}]' + self._trailer + _END

    def start_events(self) -> bytes:
        """Return nothing: Gemini's first event carries the first token."""
        return b""

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return token `index`'s event as (shared prefix, tail)."""
        return self._TOKEN_PREFIX, self._tails[(self._offset + index) % len(self._tails)]

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one event carrying tokens `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        return self.text_event("".join(WORDS[(self._offset + i) % len(WORDS)] for i in range(start, stop)))

    def text_event(self, text: str) -> bytes:
        """Return a token event carrying `text` (built per call: for rare events only)."""
        return self._TOKEN_PREFIX + self._tail(orjson.dumps(text))

    def _finish_reason(self) -> str:
        return "MAX_TOKENS" if self.spec.finish_reason == "length" else "STOP"

    def _usage(self) -> dict[str, int]:
        spec = self.spec
        return {"promptTokenCount": spec.prompt_tokens, "candidatesTokenCount": spec.output_tokens,
                "totalTokenCount": spec.prompt_tokens + spec.output_tokens}  # fmt: skip

    def end_events(self) -> list[bytes]:
        """Return the last event: an empty text part, the finish reason and the usage."""
        candidate = {"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": self._finish_reason(),
                     "index": 0}  # fmt: skip
        event = b'data: {"candidates":[%b],"usageMetadata":%b' % (orjson.dumps(candidate), orjson.dumps(self._usage()))
        return [event + self._trailer + _END]

    def error_event(self, message: str) -> bytes:
        """Return an `error` object of status UNAVAILABLE (a mid-stream failure)."""
        return b"data: " + orjson.dumps({"error": {"code": 503, "message": message, "status": "UNAVAILABLE"}}) + _END

    def body(self) -> bytes:
        """Return the whole response as one JSON object (not an event stream: the `non_sse` fault)."""
        candidate = {"content": {"parts": [{"text": output_text(self.spec, self._offset)}], "role": "model"},
                     "finishReason": self._finish_reason(), "index": 0}  # fmt: skip
        return b'{"candidates":[%b],"usageMetadata":%b' % (orjson.dumps(candidate), orjson.dumps(self._usage())) + (
            self._trailer
        )


API = Api(
    name="gemini",
    paths=(  # the Gemini API's, Vertex AI's
        "/v1beta/models/{model}:streamGenerateContent",
        "/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent",
    ),
    id_prefix="gemini",
    parse=parse,
    encoder=GeminiEncoder,
    query="alt=sse",
)
