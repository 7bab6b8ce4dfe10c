"""The function schemas (tools) an agent's requests carry: synthetic (`--tools N`) or read from a file (`--tools-file`).

A tool is kept in one neutral form, a dict `{"name", "description", "parameters"}` whose `parameters` is a JSON Schema
object; each API shapes it into its own field (`apis.Api.tools`, its module's). A tool set is the tuple of tools
one request (one agent session) carries.

- Synthetic (`synthetic_tools`): N realistic functions (a verb and an object for the name, a description, two to five
  typed properties with descriptions, enums and bounds, one or two required), the same for every user and worker of
  a run with the same `--seed` — as an agent's tool list is the same on every request, a prefix the server can cache.
- From a file (`load_tool_sets`): JSON Lines, one tool set per line — a BFCL entry (`{"id", "question",
  "function": [...]}`, the Berkeley Function-Calling Leaderboard's format, whose parameter types are Python's: `dict`,
  `float`, `tuple`, `any` ... mapped to JSON Schema's as BFCL's own OpenAI handler does, dots in names made `_`), or
  `{"tools": [...]}` in OpenAI's form; lines that are one function each (neutral, or OpenAI's `{"type": "function",
  "function": {...}}`) make one set together. Each session draws one set.

Pure; a bad file is a `ConfigError` naming it and the line.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from llm_locust.errors import ConfigError

Tool = dict[str, Any]
ToolSet = tuple[Tool, ...]

_VERBS = ("get", "search", "create", "update", "delete", "list", "send", "schedule", "cancel", "book", "convert",
          "calculate", "fetch", "summarize", "validate", "translate")  # fmt: skip
_OBJECTS = (
    ("weather_forecast", "the weather forecast for a place"), ("flight", "a flight between two airports"),
    ("calendar_event", "an event in the user's calendar"), ("invoice", "an invoice of the billing system"),
    ("customer_record", "a customer record in the CRM"), ("file", "a file in the project's repository"),
    ("email", "an email message"), ("stock_quote", "the quote of a listed stock"),
    ("restaurant_table", "a table at a restaurant"), ("support_ticket", "a ticket in the support queue"),
    ("currency_amount", "an amount of money in another currency"), ("shipping_label", "a shipping label for a parcel"),
    ("database_query", "a read-only SQL query on the analytics database"), ("web_page", "a web page by its URL"),
    ("meeting_notes", "the notes of a meeting"), ("unit_test", "a unit test of the code base"),
)  # fmt: skip
_PROPERTIES = (
    ("location", {"type": "string", "description": "City and country, e.g. Paris, France"}),
    ("date", {"type": "string", "description": "Date in ISO 8601 format, e.g. 2026-11-25"}),
    ("unit", {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}),
    ("limit", {"type": "integer", "minimum": 1, "maximum": 100, "description": "Maximum number of results"}),
    ("query", {"type": "string", "description": "Free-text search query"}),
    ("id", {"type": "string", "description": "Identifier of the record"}),
    ("amount", {"type": "number", "minimum": 0, "description": "Amount in the currency's main unit"}),
    ("currency", {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"], "description": "ISO 4217 currency code"}),
    ("include_archived", {"type": "boolean", "description": "Whether to include archived records"}),
    ("email_address", {"type": "string", "description": "Recipient's email address"}),
    ("priority", {"type": "string", "enum": ["low", "normal", "high", "urgent"], "description": "Priority"}),
    ("path", {"type": "string", "description": "Path relative to the repository's root"}),
    ("tags", {"type": "array", "items": {"type": "string"}, "description": "Labels to attach"}),
    ("passengers", {"type": "integer", "minimum": 1, "maximum": 9, "description": "Number of passengers"}),
)  # fmt: skip

_BFCL_TYPES = {
    "dict": "object", "float": "number", "double": "number", "tuple": "array", "list": "array", "any": "string",
    "bool": "boolean", "int": "integer", "long": "integer", "str": "string", "char": "string", "String": "string",
    "HashMap": "object", "ArrayList": "array", "Array": "array",
}  # fmt: skip
"""BFCL's parameter types (Python's and Java's names) → JSON Schema's, as BFCL's OpenAI handler converts them."""
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def synthetic_tools(count: int, seed: int | None) -> ToolSet:
    """`count` synthetic function schemas, the same for the same (`count`, `seed`): distinct names (verb_object, a
    number added once the pairs run out), a description, 2-5 properties of which 1-2 required."""
    rng = random.Random(f"tools/{seed}")
    pairs = [(verb, obj) for verb in _VERBS for obj in _OBJECTS]
    rng.shuffle(pairs)
    tools = []
    for index in range(count):
        verb, (obj, what) = pairs[index % len(pairs)]
        name = f"{verb}_{obj}" + (f"_{index // len(pairs) + 1}" if index >= len(pairs) else "")
        chosen = rng.sample(_PROPERTIES, rng.randint(2, 5))
        required = [prop for prop, _ in chosen[: rng.randint(1, 2)]]
        tools.append({
            "name": name,
            "description": f"{verb.capitalize()} {what}. Returns the result as JSON.",
            "parameters": {"type": "object", "properties": dict(chosen), "required": required},
        })  # fmt: skip
    return tuple(tools)


@lru_cache(maxsize=4)
def load_tool_sets(path: str) -> tuple[ToolSet, ...]:
    """The tool sets of the JSON Lines file at `path` (module docstring); ConfigError naming the file and line."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as e:
        raise ConfigError(f"--tools-file {path}: cannot read it ({e.strerror or e})") from None
    sets: list[ToolSet] = []
    singles: list[Tool] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
            listed = entry.get("tools", None if entry.get("type") == "function" else entry.get("function"))
            if listed is None:
                singles.append(_tool(entry))
            else:
                sets.append(tuple(_tool(t) for t in (listed if isinstance(listed, list) else [listed])))
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as e:
            raise ConfigError(f"--tools-file {path} line {number}: {e}; expected a BFCL entry (with 'function'), "
                              "{\"tools\": [...]} or one function schema per line") from None  # fmt: skip
    if singles:
        sets.append(tuple(singles))
    if not sets or not all(sets):
        raise ConfigError(f"--tools-file {path}: no tool in it (or a line with an empty list of functions)")
    return tuple(sets)


def _tool(entry: dict[str, Any]) -> Tool:
    """One function schema in the neutral form, from neutral, OpenAI (`{"type": "function", "function": ...}`) or
    BFCL form; ValueError when it has no name."""
    function = entry.get("function") if entry.get("type") == "function" else entry
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        raise ValueError("a function schema without a name")
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return {
        "name": _NAME_BAD.sub("_", function["name"])[:64],
        "description": str(function.get("description") or ""),
        "parameters": _json_schema(parameters),
    }


def _json_schema(schema: Any) -> Any:
    """`schema` with BFCL's type names replaced by JSON Schema's, recursively."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _json_schema(value) for key, value in schema.items()}
    kind = converted.get("type")
    if isinstance(kind, str):
        converted["type"] = _BFCL_TYPES.get(kind, kind)
    return converted
