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
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from llm_locust.sim.apis.wire import CompletionSpec, History, Tool, ToolCall, ToolChoice, bad_request
from llm_locust.sim.words import WORDS

MAX_PROPERTIES = 4
"""Properties of a tool's schema given a value in the arguments, at most (the first ones)."""
_PIECE = re.compile(r"\s*\S+")


@dataclass(frozen=True, slots=True)
class ToolForm:
    """How one API's requests offer function tools, choose among them and carry earlier calls back: its module
    declares it and passes it to `tool_fields` (chat's, Responses', Messages')."""

    function: Callable[[dict[str, Any]], tuple[Any, Any] | None]
    """A `tools` item's name and its parameters' JSON schema (both as given); None for a tool of another type (a
    built-in tool), left out; ApiError (400) for a function tool it cannot read."""
    choice: Callable[[Any], tuple[str | None, Any]]
    """A `tool_choice` value's kind — "auto", "none", "required" or "named" (one tool, the name given); None: not one
    the API accepts — and the name it gives."""
    history: Callable[[dict[str, Any]], History]
    """The `History` of a request (already validated as the API's request)."""


def offered_tools(data: dict[str, Any], form: ToolForm) -> tuple[Tool, ...]:
    """The function tools of request `data` in `form` (its `function`: tools of other types are left out). ApiError
    (400) if `tools` is not a list of objects or a function tool has no name."""
    items = data.get("tools")
    if items is None:
        return ()
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise bad_request("'tools' must be a list of objects")
    tools = []
    for item in items:
        function = form.function(item)
        if function is None:
            continue
        name, schema = function
        if not isinstance(name, str) or not name:
            raise bad_request("each function tool needs a non-empty 'name'")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        tools.append(Tool(name, properties if isinstance(properties, dict) else {}))
    return tuple(tools)


def tool_fields(data: dict[str, Any], form: ToolForm) -> dict[str, Any]:
    """The `CompletionSpec` fields of request `data` about tools, read in its API's `form`: the history it carries
    and, when it offers `tools`, the tools a call may name and its tool choice (ApiError for bad tools or a bad tool
    choice)."""
    history = form.history(data)
    if "tools" not in data:
        return {"history": history}
    choice, tools = tool_choice(data, form, offered_tools(data, form))
    return {"tools": tools, "tool_choice": choice, "history": history}


def tool_choice(data: dict[str, Any], form: ToolForm, tools: tuple[Tool, ...]) -> tuple[ToolChoice, tuple[Tool, ...]]:
    """Request `data`'s `tool_choice` read in `form` and the `tools` a call may then name: "auto" (absent, or its
    auto), "none", "required" with every tool, or "required" with the one tool named. ApiError (400) for any other
    value or a name that is not among `tools`."""
    choice = data.get("tool_choice")
    if choice is None:
        return "auto", tools
    kind, name = form.choice(choice)
    if kind is None or (kind == "named" and not isinstance(name, str)):
        raise bad_request(f"'tool_choice' {json.dumps(choice)} is not one this API accepts")
    if kind != "named":
        return kind, tools  # type: ignore[return-value]  # one of ToolChoice's values
    named = tuple(tool for tool in tools if tool.name == name)
    if not named:
        raise bad_request(f"'tool_choice' names the tool '{name}', which is not among the request's function tools")
    return "required", named


def openai_choice(choice: Any, function: Callable[[dict[str, Any]], Any]) -> tuple[str | None, Any]:
    """An OpenAI `tool_choice` (chat's, Responses'): "auto", "none", "required", or a named function — a
    `{"type": "function"}` object whose `function` (chat: its `function` object; Responses: itself) holds the name."""
    if isinstance(choice, str):
        return (choice if choice in ("auto", "none", "required") else None), None
    if isinstance(choice, dict) and choice.get("type") == "function":
        named = function(choice)
        return "named", named.get("name") if isinstance(named, dict) else None
    return None, None


def typed_ids(items: list[Any], kind: str, key: str) -> list[str]:
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
