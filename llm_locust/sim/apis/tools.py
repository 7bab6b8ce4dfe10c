"""Tool calls: what a request offers (`tools`) and carries back (earlier calls and their results), and the
simulator's answer with a tool call instead of text.

A request of chat, Responses or Messages that offers function tools is answered with a tool call with probability
`--tool-call-rate` (one seeded draw per such request, `--tool-call-seed`); its `tool_choice` can forbid a call
("none") or require one (a call always, of the tool it names if it names one). The call names one of the offered tools
(drawn) and its arguments are a JSON object built from the tool's parameter schema: per property (the first
`MAX_PROPERTIES`), a string of 2 to 4 words, an integer, a number, a boolean, a list of one word or an empty object by
its `type`; a tool without properties gets `{"query": <words>}`. With probability `--tool-call-malformed-rate` (a
second draw) the arguments lose their closing brace: not valid JSON, as a model cut short writes them.

The arguments text is cut into `pieces`, one per output token: its whitespace-separated words, each with the space
before it (one token per word, as for text; sent back in a later request, the call counts as many prompt tokens).
Each piece is one streamed event, timed as a text token, and usage counts them as output tokens. A request's maximum
output length cuts the call short (finish "length"), as it would a text answer.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import replace
from typing import Any

from llm_locust.sim.apis.wire import CompletionSpec, Endpoint, History, Tool, ToolCall, ToolChoice, bad_request
from llm_locust.sim.words import WORDS

MAX_PROPERTIES = 4
"""Properties of a tool's schema given a value in the arguments, at most (the first ones)."""
_PIECE = re.compile(r"\s*\S+")


def offered_tools(data: dict[str, Any], endpoint: Endpoint) -> tuple[Tool, ...]:
    """The function tools of request `data` in `endpoint`'s format (chat: `{"type": "function", "function": {name,
    parameters}}`; Responses: `{"type": "function", name, parameters}`; Messages: `{name, input_schema}`); tools of
    other types (built-in tools) are left out. ApiError (400) if `tools` is not a list of objects or a function
    tool has no name."""
    items = data.get("tools")
    if items is None:
        return ()
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise bad_request("'tools' must be a list of objects")
    tools = []
    for item in items:
        if endpoint == "chat":
            if item.get("type", "function") != "function":
                continue
            function = item.get("function")
            if not isinstance(function, dict):
                raise bad_request("each chat tool needs a 'function' object")
            name, schema = function.get("name"), function.get("parameters")
        elif endpoint == "responses":
            if item.get("type") != "function":
                continue
            name, schema = item.get("name"), item.get("parameters")
        else:  # messages: a client tool has an input_schema, a server tool a type
            if "input_schema" not in item:
                continue
            name, schema = item.get("name"), item.get("input_schema")
        if not isinstance(name, str) or not name:
            raise bad_request("each function tool needs a non-empty 'name'")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        tools.append(Tool(name, properties if isinstance(properties, dict) else {}))
    return tuple(tools)


def tool_fields(data: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    """The `CompletionSpec` fields of request `data` about tools: the history it carries and, when it offers `tools`,
    the tools a call may name and its tool choice (ApiError for bad tools or a bad tool choice)."""
    history = carried_history(data, endpoint)
    if "tools" not in data:
        return {"history": history}
    choice, tools = tool_choice(data, endpoint, offered_tools(data, endpoint))
    return {"tools": tools, "tool_choice": choice, "history": history}


def tool_choice(
    data: dict[str, Any], endpoint: Endpoint, tools: tuple[Tool, ...]
) -> tuple[ToolChoice, tuple[Tool, ...]]:
    """Request `data`'s `tool_choice` in `endpoint`'s format and the `tools` a call may then name: "auto" (absent,
    or `auto`), "none" (`none`), "required" (chat and Responses `required`, Messages `{"type": "any"}`) with every
    tool, or "required" with the one tool named (chat `{"type": "function", "function": {"name"}}`, Responses
    `{"type": "function", "name"}`, Messages `{"type": "tool", "name"}`). ApiError (400) for any other value or a
    name that is not among `tools`."""
    choice = data.get("tool_choice")
    if choice is None:
        return "auto", tools
    kind, name = None, None
    if endpoint == "messages":
        if isinstance(choice, dict):
            kind = {"auto": "auto", "none": "none", "any": "required", "tool": "named"}.get(choice.get("type"))
            name = choice.get("name")
    elif isinstance(choice, str):
        kind = choice if choice in ("auto", "none", "required") else None
    elif isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function") if endpoint == "chat" else choice
        kind, name = "named", function.get("name") if isinstance(function, dict) else None
    if kind is None or (kind == "named" and not isinstance(name, str)):
        raise bad_request(f"'tool_choice' {json.dumps(choice)} is not one this API accepts")
    if kind != "named":
        return kind, tools  # type: ignore[return-value]  # one of ToolChoice's values
    named = tuple(tool for tool in tools if tool.name == name)
    if not named:
        raise bad_request(f"'tool_choice' names the tool '{name}', which is not among the request's function tools")
    return "required", named


def carried_history(data: dict[str, Any], endpoint: Endpoint) -> History:
    """The `History` of request `data` (already validated as `endpoint`'s request)."""
    if endpoint == "responses":
        items = data.get("input")
        if not isinstance(items, list):
            return History(messages=1)
        calls = tuple(_ids(items, "function_call", "call_id"))
        return History(calls, tuple(_ids(items, "function_call_output", "call_id")), len(items))
    messages = data.get("messages") or []
    if endpoint == "chat":
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
    blocks = [block for message in messages if isinstance(message.get("content"), list) for block in message["content"]]
    return History(tuple(_ids(blocks, "tool_use", "id")), tuple(_ids(blocks, "tool_result", "tool_use_id")),
                   len(messages))  # fmt: skip


def _ids(items: list[Any], kind: str, key: str) -> list[str]:
    """The string `key` of every object of `items` whose `type` is `kind`."""
    return [item[key] for item in items
            if isinstance(item, dict) and item.get("type") == kind and isinstance(item.get(key), str)]  # fmt: skip


class ToolCaller:
    """Decides, per request offering tools, whether it is answered with a tool call, and builds the call (seeded;
    see the module docstring)."""

    def __init__(self, rate: float, malformed_rate: float, seed: int) -> None:
        self.rate = rate
        self.malformed_rate = malformed_rate
        self._random = random.Random(seed)

    def answer(self, spec: CompletionSpec, id_prefix: str) -> CompletionSpec:
        """`spec` itself (a text answer), or `spec` answering with a tool call of one of its tools (`id_prefix`:
        the call id's, e.g. "call_"), its output tokens the call's pieces (at most the request's maximum)."""
        tools = spec.tools
        if not tools or spec.tool_choice == "none":
            return spec
        if spec.tool_choice == "auto" and (self.rate <= 0 or self._random.random() >= self.rate):
            return spec
        draw = self._random
        tool = draw.choice(tools)
        arguments = json.dumps(_arguments(tool, draw))  # `{"a": 1, "b": 2}`, spaced as models write it
        malformed = self.malformed_rate > 0 and draw.random() < self.malformed_rate
        if malformed:
            arguments = arguments[:-1]
        pieces = tuple(_PIECE.findall(arguments))
        cut = spec.max_tokens is not None and spec.max_tokens < len(pieces)
        call = ToolCall(f"{id_prefix}{uuid.uuid4().hex[:24]}", tool.name, arguments,
                        pieces[: spec.max_tokens] if cut else pieces, malformed)  # fmt: skip
        return replace(
            spec, output_tokens=len(call.pieces), finish_reason="length" if cut else "tool_calls", tool_call=call
        )


def _arguments(tool: Tool, draw: random.Random) -> dict[str, Any]:
    """A JSON object of arguments for `tool` (see the module docstring)."""
    names = list(tool.properties)[:MAX_PROPERTIES]
    if not names:
        return {"query": _words(draw)}
    arguments: dict[str, Any] = {}
    for name in names:
        schema = tool.properties[name]
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "integer":
            arguments[name] = draw.randint(1, 100)
        elif kind == "number":
            arguments[name] = round(draw.uniform(0, 100), 2)
        elif kind == "boolean":
            arguments[name] = draw.random() < 0.5
        elif kind == "array":
            arguments[name] = [_words(draw, 1, 1)]
        elif kind == "object":
            arguments[name] = {}
        else:
            arguments[name] = _words(draw)
    return arguments


def _words(draw: random.Random, low: int = 2, high: int = 4) -> str:
    """`low` to `high` words of the simulator's word list, joined by spaces."""
    return " ".join(draw.choice(WORDS).strip() for _ in range(draw.randint(low, high)))
