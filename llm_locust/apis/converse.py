"""Amazon Bedrock ConverseStream (`POST /model/{modelId}/converse-stream`, `--provider bedrock`), its model named in
its path: user/assistant messages of text blocks and `system` text blocks; no field forces the output length; AWS
event-stream messages (`framing.EVENTSTREAM`); and what each event means for a `RequestRecord`.

Pure, like `protocol`: one JSON decode per event, never raises. The events come in AWS event-stream messages
(`metrics.eventstream`), named by their `:event-type` header, each payload a JSON object:

- `messageStart`: `{"role": "assistant"}` — structure;
- `contentBlockStart` whose `start.toolUse` opens a tool call (its `toolUseId` and `name`: `RequestRecord.tool_calls`);
- `contentBlockDelta`: `delta.text` (non-empty) is an output token (the first one is TTFO), `delta.toolUse.input` a
  piece of a tool call's arguments (an output token too), `delta.reasoningContent.text` a reasoning token (TTFT and
  ITL, not TTFO);
- `contentBlockStop`: structure;
- `messageStop`: `stopReason` (the finish reason: "end_turn", "max_tokens", "tool_use", ...);
- `metadata`: `usage.inputTokens` (plus `cacheReadInputTokens` and `cacheWriteInputTokens`: prompt tokens),
  `usage.outputTokens` — the last event;
- a message of type `exception` (`:exception-type` throttlingException, modelStreamErrorException,
  validationException, internalServerException, serviceUnavailableException, ...): a failure, `stream_error`, with the
  exception's type and `message`.
"""

from __future__ import annotations

from typing import Any

from llm_locust.apis.registry import Api
from llm_locust.apis.shapes import content_texts, prompt_as_messages
from llm_locust.metrics.eventstream import EventMessage
from llm_locust.metrics.framing import EVENTSTREAM
from llm_locust.metrics.protocol import (
    add_tool_arguments,
    apply_token,
    decode_object,
    error_text,
    guarded,
    start_tool_call,
    token_event,
)
from llm_locust.metrics.record import ErrorKind, RequestRecord

_PROMPT_USAGE = ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")


def apply_message(record: RequestRecord, message: EventMessage, t: float, chunks: None = None) -> bool:
    """Apply one ConverseStream message that arrived at `t` (perf_counter s) to `record` (`chunks` unused); True when
    the stream is over for the client (`metadata`, an exception, a payload that is not a JSON object)."""
    event = decode_object(record, message.data)
    if event is None:
        return True
    if message.exception:
        record.fail(ErrorKind.STREAM_ERROR, f"exception {message.event or 'without a type'}: {error_text(event)}")
        return True
    return guarded(_APPLY.get(message.event or "", _structure), record, event, t)


def _delta(record: RequestRecord, event: dict, t: float) -> bool:
    delta = event["delta"]
    if delta.get("text"):
        apply_token(record, t)
    elif delta.get("toolUse") is not None:
        arguments = delta["toolUse"].get("input")
        if arguments:
            apply_token(record, t)
            add_tool_arguments(record, t, str(arguments))
    elif (delta.get("reasoningContent") or {}).get("text"):
        token_event(record, t)
    return False


def _block_start(record: RequestRecord, event: dict, t: float) -> bool:
    tool = (event.get("start") or {}).get("toolUse")
    if tool is not None:
        start_tool_call(record, t, str(tool.get("toolUseId") or ""), str(tool.get("name") or ""))
    return False


def _stop(record: RequestRecord, event: dict, t: float) -> bool:
    reason = event.get("stopReason")
    if reason:
        record.finish_reason = str(reason)
    return False


def _metadata(record: RequestRecord, event: dict, t: float) -> bool:
    usage = event.get("usage") or {}
    prompt = [usage.get(key) for key in _PROMPT_USAGE]
    if type(prompt[0]) is int:
        record.prompt_tokens = sum(n for n in prompt if type(n) is int and n >= 0)
    output = usage.get("outputTokens")
    if type(output) is int and output >= 0:
        record.usage_completion_tokens = output
    record.saw_done = True
    return True


def _structure(record: RequestRecord, event: dict, t: float) -> bool:
    return False


_APPLY = {"contentBlockDelta": _delta, "contentBlockStart": _block_start, "messageStop": _stop, "metadata": _metadata}


def event_text(event: dict) -> str | None:
    """The generated text an event's payload carries (a text, reasoning or tool-input delta), else None: what
    `--tokenizer` counts."""
    delta = event.get("delta")
    if type(delta) is not dict:
        return None
    for text in (delta.get("text"), (delta.get("toolUse") or {}).get("input"),
                 (delta.get("reasoningContent") or {}).get("text")):  # fmt: skip
        if type(text) is str:
            return text
    return None


def event_parts(event: dict) -> tuple[str | None, str | None]:
    """(answer text, reasoning text) of one event's payload: a `text` delta, a `reasoningContent` delta."""
    delta = event.get("delta")
    if type(delta) is not dict:
        return None, None
    text = delta.get("text")
    reasoning = delta.get("reasoningContent")
    thinking = reasoning.get("text") if type(reasoning) is dict else None
    return (text if type(text) is str else None), (thinking if type(thinking) is str else None)


def shape(body: dict[str, Any]) -> None:
    """Bedrock ConverseStream: user/assistant messages whose content is a list of `{"text"}` blocks; the system
    messages' texts go to the `system` field as text blocks."""
    prompt_as_messages(body)
    listed = body["messages"]
    system = [{"text": text} for m in listed if m.get("role") == "system" for text in content_texts(m.get("content"))]
    body["messages"] = [
        {"role": m["role"], "content": [{"text": text} for text in content_texts(m.get("content"))]}
        for m in listed
        if m.get("role") != "system"
    ]
    if system:
        body["system"] = system


API = Api(
    "converse", "Bedrock ConverseStream", {"bedrock": "/model/{model}/converse-stream"}, shape,
    max_tokens_field="inferenceConfig.maxTokens", forces_length=False, parser=apply_message, framing=EVENTSTREAM,
    model_field="", event_text=event_text, answer_parts=event_parts, user="ConverseUser",
)  # fmt: skip
