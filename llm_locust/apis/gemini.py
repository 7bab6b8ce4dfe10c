"""Gemini's streamed generation (`POST .../models/{model}:streamGenerateContent?alt=sse`: the Gemini API, Vertex
AI), its model named in its path: the messages as `contents` with the system messages' texts as
`systemInstruction`; tools as one tool of `functionDeclarations`, an agent step as `functionCall` and
`functionResponse` parts; no field forces the output length; on the scenario client as Google's genai SDK names it
(`self.llm.models.generate_content_stream`); and what each stream event means for a `RequestRecord`.

Pure, like `protocol`: one JSON decode per event, never raises. Each SSE event's data is one whole
`GenerateContentResponse`, with no `type` and no `[DONE]`: the stream ends with the body.

- `candidates[0].content.parts[]`: a part with a non-empty `text` is output (the first one is TTFO), or reasoning
  when it has `thought: true` (TTFT and ITL, not TTFO); a `functionCall` part (`name`, `args` — whole, never in
  pieces; `id` when the server gives one) is a tool call (`RequestRecord.tool_calls`) and an output token. An event
  with several token-bearing parts is one token event (it arrived at one time), as a chat chunk is;
- `candidates[0].finishReason` (`STOP`, `MAX_TOKENS`, `SAFETY`, ...): the finish reason, as Google spells it; a
  stream that ends without one is incomplete;
- `usageMetadata` (in every event or only the last; the last one counts): `promptTokenCount` (cached content
  included), `candidatesTokenCount` plus `thoughtsTokenCount` (the output tokens: Google counts the thoughts apart
  from the candidates), `thoughtsTokenCount` (the reasoning tokens);
- `responseId`: the server's request id (unless its `x-request-id` header gave one);
- `promptFeedback.blockReason` without candidates: the prompt was blocked — a `stream_error` failure naming the
  reason; an `error` object (`code`, `message`, `status`) inside the stream: a `stream_error` failure, or
  `overloaded` for status `UNAVAILABLE` / `RESOURCE_EXHAUSTED`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from llm_locust.apis.registry import Api
from llm_locust.apis.shapes import ToolForms, content_texts, prompt_as_messages
from llm_locust.metrics.protocol import (
    TokenChunks,
    apply_token,
    decode_object,
    error_text,
    guarded,
    note_request_id,
    start_tool_call,
    token_event,
)
from llm_locust.metrics.record import ErrorKind, RequestRecord, ToolCall

_OVERLOADED = frozenset(("UNAVAILABLE", "RESOURCE_EXHAUSTED"))
"""An in-stream error's `status` meaning the service is overloaded."""


def apply_event(record: RequestRecord, data: bytes, t: float, chunks: TokenChunks | None = None) -> bool:
    """Apply one Gemini stream event's data that arrived at `t` (perf_counter s) to `record` (`chunks` unused: see
    `protocol.EventStream`); True when the stream is over for the client (a failure; else the body's end is)."""
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    """`apply_event` on the decoded event; raises on fields of unexpected types."""
    error = event.get("error")
    if error:
        status = error.get("status") if type(error) is dict else None
        kind = ErrorKind.OVERLOADED if status in _OVERLOADED else ErrorKind.STREAM_ERROR
        record.fail(kind, f"error in stream{f' {status}' if status else ''}: {error_text(error)}")
        return True
    note_request_id(record, event.get("responseId"))
    candidates = event.get("candidates")
    if candidates:
        candidate = candidates[0]
        _parts(record, (candidate.get("content") or {}).get("parts") or (), t)
        finish_reason = candidate.get("finishReason")
        if finish_reason and finish_reason != "FINISH_REASON_UNSPECIFIED":
            record.finish_reason = str(finish_reason)
    else:
        blocked = (event.get("promptFeedback") or {}).get("blockReason")
        if blocked:
            record.fail(ErrorKind.STREAM_ERROR, f"prompt blocked: promptFeedback.blockReason {error_text(blocked)}")
            return True
    _usage(record, event.get("usageMetadata"))
    return False


def _parts(record: RequestRecord, parts: list | tuple, t: float) -> None:
    """Apply a candidate's `parts` that arrived at `t`: one token event when any part bears output or reasoning (an
    output one if any part is output), and each `functionCall` part as a tool call."""
    output = reasoning = False
    for part in parts:
        call = part.get("functionCall")
        if call:
            arguments = call.get("args")
            start_tool_call(record, t, str(call.get("id") or ""), str(call.get("name") or ""),
                            orjson.dumps(arguments).decode() if arguments is not None else "")  # fmt: skip
            output = True
        elif part.get("text"):
            if part.get("thought"):
                reasoning = True
            else:
                output = True
    if output:
        apply_token(record, t)
    elif reasoning:
        token_event(record, t)


def event_text(event: dict) -> str | None:
    """The generated text an event carries (its parts' texts, thoughts included, and function calls' names and
    arguments), else None: what `--tokenizer` counts."""
    parts = _event_parts(event)
    if parts is None:
        return None
    texts = []
    for part in parts:
        if type(part) is not dict:
            continue
        call = part.get("functionCall")
        if type(call) is dict:
            texts += [str(call.get("name") or ""), orjson.dumps(call.get("args") or {}).decode()]
        elif type(part.get("text")) is str:
            texts.append(part["text"])
    return "".join(texts)


def event_parts(event: dict) -> tuple[str | None, str | None]:
    """(answer text, reasoning text) of one event: its parts' texts, those with `thought: true` the reasoning."""
    parts = _event_parts(event)
    if parts is None:
        return None, None
    answer, reasoning = [], []
    for part in parts:
        if type(part) is dict and type(part.get("text")) is str:
            (reasoning if part.get("thought") else answer).append(part["text"])
    return "".join(answer) or None, "".join(reasoning) or None


def _event_parts(event: dict) -> list | None:
    """The parts of an event's first candidate (None when it has none, or not as a list)."""
    candidates = event.get("candidates")
    if type(candidates) is not list or not candidates or type(candidates[0]) is not dict:
        return None
    content = candidates[0].get("content")
    parts = content.get("parts") if type(content) is dict else None
    return parts if type(parts) is list else None


def _usage(record: RequestRecord, usage: dict | None) -> None:
    """Take a `usageMetadata` object's token counts onto `record`: prompt, output (candidates plus thoughts) and
    reasoning (thoughts) tokens."""
    if not usage:
        return
    prompt, candidates, thoughts = (usage.get(key) for key in
                                    ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount"))  # fmt: skip
    if type(prompt) is int and prompt >= 0:
        record.prompt_tokens = prompt
    thoughts = thoughts if type(thoughts) is int and thoughts >= 0 else None
    if type(candidates) is int and candidates >= 0:
        record.usage_completion_tokens = candidates + (thoughts or 0)
    if thoughts is not None:
        record.reasoning_tokens = thoughts


PATHS = {
    "gemini": "/v1beta/models/{model}:streamGenerateContent?alt=sse",
    "vertex": "/v1/projects/{project}/locations/{location}/publishers/google/models/{model}"
    ":streamGenerateContent?alt=sse",
}
"""Where Gemini's streamed generation is: the Gemini API's (`generativelanguage.googleapis.com`) and Vertex AI's
(`{location}-aiplatform.googleapis.com`, or `aiplatform.googleapis.com` for the `global` location)."""


def shape(body: dict[str, Any]) -> None:
    """Gemini (`streamGenerateContent`): the messages as `contents` — role `user`, or `model` for the assistant's,
    each text as a `{"text"}` part; an entry already in Gemini's form (with `parts`: an agent step's) kept as it is —
    and the system messages' texts as `systemInstruction`."""
    prompt_as_messages(body)
    contents, system = [], []
    for message in body.pop("messages"):
        role = message.get("role")
        if "parts" in message:
            contents.append(message)
        elif role == "system":
            system += content_texts(message.get("content"))
        else:
            parts = [{"text": text} for text in content_texts(message.get("content"))]
            contents.append({"role": "model" if role == "assistant" else "user", "parts": parts})
    body["contents"] = contents
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n".join(system)}]}


def _tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Gemini's `tools`: one tool of `functionDeclarations` (name, description, parameters' schema)."""
    return [{"functionDeclarations": [dict(tool) for tool in tools]}]


def _step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Gemini: a `model` content of a text part (if any) and a `functionCall` part per call (its arguments as the
    `args` object, its `id` if the server gave one), then a `user` content of a `functionResponse` part per result
    (the call's name and id, the result text as `response.result`)."""
    parts: list[dict[str, Any]] = [{"text": content}] if content else []
    parts += [{"functionCall": {"name": c.name, "args": orjson.loads(c.arguments or "{}"), **_call_id(c)}}
              for c in calls]  # fmt: skip
    answers = [{"functionResponse": {"name": c.name, "response": {"result": r}, **_call_id(c)}}
               for c, r in zip(calls, results, strict=True)]  # fmt: skip
    return [{"role": "model", "parts": parts}, {"role": "user", "parts": answers}]


def _call_id(call: ToolCall) -> dict[str, str]:
    """A Gemini function call's or response's `id` field: the call's id, if the server gave one."""
    return {"id": call.id} if call.id else {}


API = Api(
    "gemini", "Gemini's streamGenerateContent", PATHS, shape, max_tokens_field="generationConfig.maxOutputTokens",
    forces_length=False, parser=apply_event, model_field="", event_text=event_text, answer_parts=event_parts,
    tools=ToolForms(_tools, _step), mount="models.generate_content_stream", user="GeminiUser",
)  # fmt: skip
