"""The chat completions API (`POST /v1/chat/completions`): its request and its `chat.completion.chunk` events.

The request's `messages`, `max_tokens` (or `max_completion_tokens`) and `tools`. The stream opens with the role
event, `delta: {"role": "assistant", "content": ""}`, then one `delta: {"content": ...}` chunk per token, as text
completions' chunks (`completions.py`) otherwise. A tool call (`llm_locust.sim.apis.tools`) is one
`delta: {"tool_calls": [...]}` chunk per piece of its arguments, as vLLM and OpenAI stream it: the first names the
call (`index`, `id`, `type`, `function.name`) with the first piece, each later one is `{"index": 0, "function":
{"arguments": piece}}`; the last has finish_reason "tool_calls".
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.completions import OPEN_CHOICE_TAIL, ChunkEncoder, response_format
from llm_locust.sim.apis.tools import ToolForm, openai_choice, tool_fields
from llm_locust.sim.apis.wire import (
    Api,
    CompletionSpec,
    History,
    ScriptedPieces,
    bad_request,
    completion_spec,
    messages_prompt,
    optional_int,
)
from llm_locust.sim.words import WORDS


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a chat completion request `data` (ApiError if it is unacceptable)."""
    prompt_tokens, prompt_text = messages_prompt(data)
    max_tokens = optional_int(data, "max_tokens")
    if max_tokens is None:
        max_tokens = optional_int(data, "max_completion_tokens")
    fields = tool_fields(data, TOOLS)
    return completion_spec(data, prompt_tokens, prompt_text, max_tokens, natural_tokens, **fields)


def _function(item: dict[str, Any]) -> tuple[Any, Any] | None:
    """A chat tool's name and parameters: `{"type": "function", "function": {name, parameters}}` (`type` may be left
    out); None for a tool of another type."""
    if item.get("type", "function") != "function":
        return None
    function = item.get("function")
    if not isinstance(function, dict):
        raise bad_request("each chat tool needs a 'function' object")
    return function.get("name"), function.get("parameters")


def _history(data: dict[str, Any]) -> History:
    """The calls of the assistant messages' `tool_calls` and the results of the `role: "tool"` messages
    (`tool_call_id`), and the number of messages."""
    messages = data.get("messages") or []
    calls = tuple(
        call["id"]
        for message in messages
        if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list)
        for call in message["tool_calls"]
        if isinstance(call, dict) and isinstance(call.get("id"), str)
    )
    results = tuple(
        message["tool_call_id"]
        for message in messages
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str)
    )
    return History(calls, results, len(messages))


TOOLS = ToolForm(_function, lambda choice: openai_choice(choice, lambda named: named.get("function")), _history)
"""Chat's tools, its `tool_choice` (a named one: `{"type": "function", "function": {"name"}}`) and its history."""


class ChatEncoder(ChunkEncoder):
    """The chunks of one chat completion (see the module docstring)."""

    __slots__ = ()

    OBJECT = b"chat.completion.chunk"
    BODY_OBJECT = "chat.completion"
    TOKEN_OPEN = b',"choices":[{"index":0,"delta":{"content":'
    CLOSING = b"}"
    TAILS = tuple(orjson.dumps(word) + b"}" + OPEN_CHOICE_TAIL for word in WORDS)

    def start_events(self) -> bytes:
        """Return the role event, `delta: {"role": "assistant", "content": ""}`, sent with the response head."""
        return (
            self._head
            + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
            + b'"logprobs":null,"finish_reason":null}]}\n\n'
        )

    def choice(self, text: str) -> dict[str, Any]:
        """The non-streamed response's one choice: the assistant's message carrying `text`."""
        message = {"role": "assistant", "content": text}
        return {"index": 0, "message": message, "logprobs": None, "finish_reason": self.spec.finish_reason}


class ChatToolEncoder(ChatEncoder):
    """The chunks of one chat completion answering with the spec's tool call (see the module docstring); each chunk
    is encoded when written (a tool call is short)."""

    __slots__ = ()

    def _chunk(self, start: int, stop: int, arguments: str | None = None) -> bytes:
        """The chunk carrying the call's pieces `start` .. `stop - 1` (or `arguments` instead), opening the call
        when `start` is 0, with the finish_reason when it holds the last piece."""
        call = self.spec.tool_call
        assert call is not None
        function = {"arguments": "".join(call.pieces[start:stop]) if arguments is None else arguments}
        entry: dict[str, Any] = {"index": 0, "function": function}
        if start == 0:
            entry = {"index": 0, "id": call.id, "type": "function", "function": {"name": call.name, **function}}
        finish = self.spec.finish_reason if stop > self._last_index else None
        choice = {"index": 0, "delta": {"tool_calls": [entry]}, "logprobs": None, "finish_reason": finish}
        return self._head + b',"choices":[' + orjson.dumps(choice) + b"]}\n\n"

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Return the chunk of the call's piece `index` as (empty prefix, chunk)."""
        return b"", self._chunk(index, index + 1)

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Return one chunk carrying pieces `start` .. `stop - 1` (`--tokens-per-chunk`)."""
        return self._chunk(start, stop)

    def text_event(self, text: str) -> bytes:
        """Return an arguments chunk carrying `text` (the huge_chunk fault)."""
        return self._chunk(1, 1, text)

    def choice(self, text: str) -> dict[str, Any]:
        """The non-streamed response's one choice: the assistant's message carrying the tool call (not `text`)."""
        call = self.spec.tool_call
        assert call is not None
        function = {"name": call.name, "arguments": "".join(call.pieces)}
        message = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": call.id, "type": "function", "function": function}]}  # fmt: skip
        return {"index": 0, "message": message, "logprobs": None, "finish_reason": self.spec.finish_reason}


class ChatAnswerEncoder(ScriptedPieces, ChatEncoder):
    """The chunks of one chat completion carrying the spec's answer (`llm_locust.sim.answers`)."""

    __slots__ = ()


API = Api(
    name="chat",
    paths=(
        "/v1/chat/completions",
        "/openai/v1/chat/completions",  # Bedrock's OpenAI-compatible chat
        "/openai/deployments/{deployment}/chat/completions",  # Azure OpenAI (with ?api-version=)
        "/serving-endpoints/{endpoint}/invocations",  # Databricks
        "/v1/projects/{project}/locations/{location}/endpoints/openapi/chat/completions",  # Vertex AI's OpenAI
        "/v1beta1/projects/{project}/locations/{location}/endpoints/openapi/chat/completions",
    ),
    id_prefix="chatcmpl",
    parse=parse,
    encoder=ChatEncoder,
    tool_encoder=ChatToolEncoder,
    answer_encoder=ChatAnswerEncoder,
    output_format=response_format,
)
