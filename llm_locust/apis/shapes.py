"""How a prompt becomes each API's request fields (`apis.Api.shape`): pure functions that change a body in place.

A streamed API's shape gets the prompt fields — `prompt` (a text) or `messages` (chat messages, from a dataset),
maybe more fields of a dataset entry — and leaves the API's own: chat `messages`, text completions `prompt`,
Responses `input` (the prompt text, or the messages), Anthropic Messages `messages` with the system messages moved
to its `system` field, Gemini `contents` (roles `user` and `model`, text parts) with the system messages' texts in
its `systemInstruction`, Bedrock ConverseStream `messages` of text blocks and `system` text blocks. An API that
counts inputs (`Api.counts_outputs` False) gets `texts`, the list of its `--embedding-batch` prompt texts: embeddings
send them as `input`.

An API that takes tools has its `ToolForms` (`apis.Api.tools`: `CHAT_TOOLS`, `RESPONSES_TOOLS`, `MESSAGES_TOOLS`,
`GEMINI_TOOLS`): the
neutral function schemas of `workload/tools.py` in its own `tools` field, and an agent step's tool calls and results
in its own history messages.

An API that takes a structured output (`--response-format`) has its `ResponseFormat`: chat's `response_format`, the
Responses API's `text.format`, text completions' field of the server family (vLLM's `structured_outputs`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from llm_locust.errors import ConfigError
from llm_locust.metrics.record import ToolCall


def chat(body: dict[str, Any]) -> None:
    """Chat: the prompt as one user message."""
    if "prompt" in body:
        body["messages"] = [{"role": "user", "content": body.pop("prompt")}]


def completions(body: dict[str, Any]) -> None:
    """Text completions: the messages' texts joined into one prompt."""
    if "messages" in body:
        body["prompt"] = joined(body.pop("messages"))


def responses(body: dict[str, Any]) -> None:
    """Responses API: the prompt text, or the messages, as `input`."""
    body["input"] = body.pop("prompt") if "prompt" in body else body.pop("messages")


def messages(body: dict[str, Any]) -> None:
    """Anthropic Messages: user/assistant messages; the system messages' texts go to the `system` field."""
    chat(body)
    listed = body["messages"]
    system = [m["content"] for m in listed if m.get("role") == "system" and isinstance(m.get("content"), str)]
    body["messages"] = [m for m in listed if m.get("role") != "system"]
    if system:
        body["system"] = "\n".join(system)


def gemini(body: dict[str, Any]) -> None:
    """Gemini (`streamGenerateContent`): the messages as `contents` — role `user`, or `model` for the assistant's,
    each text as a `{"text"}` part; an entry already in Gemini's form (with `parts`: an agent step's) kept as it is —
    and the system messages' texts as `systemInstruction`."""
    chat(body)
    contents, system = [], []
    for message in body.pop("messages"):
        role = message.get("role")
        if "parts" in message:
            contents.append(message)
        elif role == "system":
            system += _texts(message.get("content"))
        else:
            parts = [{"text": text} for text in _texts(message.get("content"))]
            contents.append({"role": "model" if role == "assistant" else "user", "parts": parts})
    body["contents"] = contents
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n".join(system)}]}


def converse(body: dict[str, Any]) -> None:
    """Bedrock ConverseStream: user/assistant messages whose content is a list of `{"text"}` blocks; the system
    messages' texts go to the `system` field as text blocks."""
    chat(body)
    listed = body["messages"]
    system = [{"text": text} for m in listed if m.get("role") == "system" for text in _texts(m.get("content"))]
    body["messages"] = [
        {"role": m["role"], "content": [{"text": text} for text in _texts(m.get("content"))]}
        for m in listed
        if m.get("role") != "system"
    ]
    if system:
        body["system"] = system


def _texts(content: Any) -> list[str]:
    """The texts of a chat message's content: the string, or its text parts."""
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content or () if isinstance(part, dict) and isinstance(part.get("text"), str)]


@dataclass(frozen=True)
class ToolForms:
    """How an API takes tools (`apis.Api.tools`): `schemas` shapes the neutral function schemas (`{"name",
    "description", "parameters"}`, `workload/tools.py`) into its `tools` field; `step(content, calls, results)` makes
    the history messages of one agent step in its own form — the assistant's answer (its text `content`, maybe "",
    and its tool `calls`) and each call's result text (`results`, in the calls' order)."""

    schemas: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]]
    step: Callable[[str, Sequence[ToolCall], Sequence[str]], list[dict[str, Any]]]


def _chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat completions' `tools`: each function schema as a function tool."""
    return [{"type": "function", "function": dict(tool)} for tool in tools]


def _chat_step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Chat: an assistant message with its `tool_calls`, then a `role: "tool"` message per result (`tool_call_id`)."""
    functions = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
    ]
    answer = {"role": "assistant", "content": content or None, "tool_calls": functions}
    return [
        answer,
        *({"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, results, strict=True)),
    ]


def _responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Responses API's `tools`: function tools with the schema's fields at the top."""
    return [{"type": "function", **tool} for tool in tools]


def _responses_step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Responses: the answer's text as an assistant message (if any), a `function_call` input item per call, a
    `function_call_output` item per result (by `call_id`)."""
    items: list[dict[str, Any]] = [{"role": "assistant", "content": content}] if content else []
    items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    items += [
        {"type": "function_call_output", "call_id": c.id, "output": r} for c, r in zip(calls, results, strict=True)
    ]
    return items


def _messages_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic Messages' `tools`: name, description and the parameters' schema as `input_schema`."""
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def _messages_step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Anthropic Messages: an assistant message of a text block (if any) and a `tool_use` block per call (its
    arguments as the `input` object), then a user message of a `tool_result` block per result (`tool_use_id`)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": orjson.loads(c.arguments or "{}")}
               for c in calls]  # fmt: skip
    answers = [{"type": "tool_result", "tool_use_id": c.id, "content": r} for c, r in zip(calls, results, strict=True)]
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": answers}]


def _gemini_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Gemini's `tools`: one tool of `functionDeclarations` (name, description, parameters' schema)."""
    return [{"functionDeclarations": [dict(tool) for tool in tools]}]


def _gemini_step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
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


CHAT_TOOLS = ToolForms(_chat_tools, _chat_step)
RESPONSES_TOOLS = ToolForms(_responses_tools, _responses_step)
MESSAGES_TOOLS = ToolForms(_messages_tools, _messages_step)
GEMINI_TOOLS = ToolForms(_gemini_tools, _gemini_step)


RESPONSE_FORMATS = ("json_schema", "json_object")
"""The kinds of `--response-format`: an answer valid for a JSON schema, or any JSON object."""
SCHEMA_NAME = "answer"
"""The name a JSON schema is sent under where the API asks for one (chat, Responses)."""

ResponseFormat = Callable[[str, Mapping[str, Any], str], dict[str, Any]]
"""An API's structured-output fields (`apis.Api.response_format`): (kind — one of `RESPONSE_FORMATS` —, the JSON
schema, the server family) → the body fields that ask for it; ConfigError when the family's server takes none."""


def chat_format(kind: str, schema: Mapping[str, Any], family: str) -> dict[str, Any]:
    """Chat's `response_format`: `{"type": "json_schema", "json_schema": {name, schema, strict}}` or `{"type":
    "json_object"}` (OpenAI, vLLM, SGLang, llama.cpp); TGI's grammar form `{"type": "json", "value": schema}`."""
    if family == "tgi":
        return {"response_format": {"type": "json", "value": schema if kind == "json_schema" else {"type": "object"}}}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True}}}  # fmt: skip


def completions_format(kind: str, schema: Mapping[str, Any], family: str) -> dict[str, Any]:
    """Text completions' structured output, a field of the server family's own: vLLM's `structured_outputs`
    (`{"json": schema}` or `{"json_object": true}`), SGLang's `json_schema` (the schema as a JSON string),
    llama.cpp's `json_schema` (the schema object); a JSON object is the schema `{"type": "object"}` for the last two.
    ConfigError for the others (OpenAI's legacy completions, TGI, Anthropic take none)."""
    if family == "vllm":
        return {"structured_outputs": {"json": schema} if kind == "json_schema" else {"json_object": True}}
    wanted = schema if kind == "json_schema" else {"type": "object"}
    if family == "sglang":
        return {"json_schema": orjson.dumps(wanted).decode()}
    if family == "llamacpp":
        return {"json_schema": wanted}
    raise ConfigError(f"--response-format: text completions of --server-family {family} take no structured output; "
                      "use chat or the Responses API, or a vllm, sglang or llamacpp server")  # fmt: skip


def responses_format(kind: str, schema: Mapping[str, Any], family: str) -> dict[str, Any]:
    """The Responses API's `text.format`: `{"type": "json_schema", name, schema, strict}` or `{"type":
    "json_object"}`."""
    if kind == "json_object":
        return {"text": {"format": {"type": "json_object"}}}
    return {"text": {"format": {"type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": True}}}


def embeddings(body: dict[str, Any]) -> None:
    """Embeddings: the texts as the `input` list."""
    body["input"] = body.pop("texts")


def joined(messages: list[dict[str, Any]]) -> str:
    """The texts of `messages` joined by newlines (parts that are not text left out)."""
    return "\n".join(m["content"] for m in messages if isinstance(m["content"], str))
