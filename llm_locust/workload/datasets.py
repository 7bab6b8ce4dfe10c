"""Prompt files (`--dataset`): JSONL, JSON (ShareGPT-style conversations) and CSV, loaded once.

Every file becomes a tuple of conversations; a conversation is the tuple of requests one user
sends in order, each a dict of request-body fields (`messages` or `prompt`, plus any other
field the file gives, e.g. `max_tokens`, `temperature`):

- JSONL, one JSON value per line: a string (a prompt), or an object with `prompt` (string),
  `messages` (an OpenAI messages list: a full request body, sent as given) or `conversations`
  (ShareGPT turns, below). Other fields of a `prompt`/`messages` object go into the body.
- JSON: a list of such objects, e.g. a ShareGPT export:
  `[{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}]`.
  A conversation with k user turns becomes k requests; request i carries the whole history
  (system turn, user turns 1..i and the file's assistant replies 1..i-1). Conversations that
  are empty or have no user turn (common in ShareGPT exports) are skipped.
- CSV with a header row: a `prompt` column (or a single column), optional `max_tokens` column.
- `builtin:NAME[:N]`: no file, a built-in set of N items with their references, generated from `--seed`
  (`builtin_sets`: `arithmetic`, `choice`, `json`).

A `prompt`/`messages` object may carry a reference its answer is scored against (`metrics.scoring.Reference`):
`expected` (the answer, a string or a number), `regex` (a pattern the answer contains), `choices` (a list of option
texts) with `answer` (the right one: its letter "A".., or its 0-based index), `schema` (a JSON schema object the answer
must satisfy). These fields are taken out of the body; the request's dict carries the `Reference` under `REFERENCE`.

Errors are one line naming the file, the line (or entry) and the field.
"""

from __future__ import annotations

import csv
import io
import os
import string
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from llm_locust.errors import ConfigError
from llm_locust.metrics.scoring import Reference, reference_problem
from llm_locust.workload.builtin_sets import builtin_items, is_builtin

FORMATS = ("jsonl", "json", "csv")
_EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
          "bard": "assistant", "bing": "assistant", "model": "assistant", "system": "system"}  # fmt: skip

Request = dict[str, Any]
Conversation = tuple[Request, ...]

REFERENCE = "_reference"
"""Key of a request's `Reference` in its dict (not a body field: the builder takes it out)."""
REFERENCE_FIELDS = ("expected", "regex", "choices", "answer", "schema")
"""A dataset row's fields that make its reference (`reference_of`)."""


def dataset_format(path: str, given: str) -> str:
    """The format of `path`: `given` (--dataset-format) or from its extension."""
    if given:
        return given
    fmt = _EXTENSIONS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(
            f"--dataset {path}: cannot tell the format from the extension; "
            f"name it .jsonl, .json or .csv or give --dataset-format {{{','.join(FORMATS)}}}"
        )
    return fmt


def load_dataset(path: str, fmt: str, seed: int | None = None) -> tuple[Conversation, ...]:
    """The conversations of the file (parsed once per process while the file is unchanged), or of the built-in set
    `path` names ("builtin:NAME[:N]", generated from `seed`: `builtin_sets`), each item a one-turn conversation."""
    if is_builtin(path):
        return _builtin(path, seed)
    try:
        stat = os.stat(path)
    except OSError as e:
        raise ConfigError(f"--dataset {path}: {e.strerror or e}") from None
    return _load(path, dataset_format(path, fmt), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _builtin(dataset: str, seed: int | None) -> tuple[Conversation, ...]:
    return tuple(({"prompt": prompt, REFERENCE: reference},) for prompt, reference in builtin_items(dataset, seed))


@lru_cache(maxsize=4)
def _load(path: str, fmt: str, _mtime_ns: int, _size: int) -> tuple[Conversation, ...]:
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    if not text.strip():
        raise ConfigError(f"{path}: the file is empty")
    conversations = [c for c in {"jsonl": _jsonl, "json": _json, "csv": _csv}[fmt](path, text) if c]
    if not conversations:
        raise ConfigError(f"{path}: no prompt found (conversations without a user turn are skipped)")
    return tuple(conversations)


def _jsonl(path: str, text: str) -> list[Conversation]:
    conversations = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise ConfigError(f"{path}:{number}: malformed JSON ({e.msg} at column {e.colno})") from None
        conversations.append(_conversation(value, f"{path}:{number}"))
    return conversations


def _json(path: str, text: str) -> list[Conversation]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}: malformed JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(value, list):
        raise ConfigError(f"{path}: expected a JSON list of conversations (ShareGPT style); for one prompt per "
                          "line use .jsonl")  # fmt: skip
    return [_conversation(item, f"{path}: entry {index}") for index, item in enumerate(value)]


def _csv(path: str, text: str) -> list[Conversation]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = reader.fieldnames or []
    column = "prompt" if "prompt" in columns else columns[0] if len(columns) == 1 else None
    if column is None:
        raise ConfigError(f"{path}:1: no 'prompt' column (columns: {', '.join(columns)})")
    conversations = []
    for row in reader:
        where = f"{path}:{reader.line_num}"
        prompt = row.get(column)
        if not prompt or not prompt.strip():
            raise ConfigError(f"{where}: empty '{column}'")
        request: Request = {"prompt": prompt}
        max_tokens = (row.get("max_tokens") or "").strip()
        if max_tokens:
            request["max_tokens"] = _positive_int(max_tokens, where, "max_tokens")
        conversations.append((request,))
    return conversations


def _conversation(value: Any, where: str) -> Conversation:
    """One line / entry as a conversation; ConfigError naming `where` and the field."""
    if isinstance(value, str) and value.strip():
        return ({"prompt": value},)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected an object with 'prompt', 'messages' or 'conversations', or a string")
    if "conversations" in value or "conversation" in value:
        return _turns(value.get("conversations", value.get("conversation")), where)
    if "messages" in value:
        messages = value["messages"]
        if not isinstance(messages, list) or not messages or not all(_is_message(m) for m in messages):
            raise ConfigError(f"{where}: 'messages' must be a non-empty list of {{'role', 'content'}} objects")
        request = dict(value)
    elif "prompt" in value:
        if not isinstance(value["prompt"], str) or not value["prompt"].strip():
            raise ConfigError(f"{where}: 'prompt' must be a non-empty string")
        request = dict(value)
    else:
        raise ConfigError(f"{where}: no 'prompt', 'messages' or 'conversations' field (has: {', '.join(value)})")
    if "max_tokens" in request:
        request["max_tokens"] = _positive_int(request["max_tokens"], where, "max_tokens")
    reference = reference_of(request, where)
    if reference is not None:
        request[REFERENCE] = reference
    return (request,)


def reference_of(row: dict[str, Any], where: str) -> Reference | None:
    """The reference a dataset `row` carries (its `REFERENCE_FIELDS`, taken out of it), None when it has none;
    ConfigError naming `where` and the field when one is malformed."""
    fields = {name: row.pop(name) for name in REFERENCE_FIELDS if name in row}
    if not fields:
        return None
    expected = fields.get("expected")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, str | int | float)):
        raise ConfigError(f"{where}: 'expected' must be a string or a number, got {expected!r}")
    regex = fields.get("regex")
    if regex is not None and not isinstance(regex, str):
        raise ConfigError(f"{where}: 'regex' must be a string, got {regex!r}")
    choices = fields.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices) or len(choices) > 26:
        raise ConfigError(f"{where}: 'choices' must be a list of at most 26 strings")
    answer = _choice_letter(fields.get("answer"), len(choices), where)
    schema = fields.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise ConfigError(f"{where}: 'schema': a JSON schema must be an object, got {type(schema).__name__}")
    reference = Reference(None if expected is None else str(expected), regex, tuple(choices), answer, schema)
    problem = reference_problem(reference)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    return reference


def _choice_letter(answer: Any, choices: int, where: str) -> str | None:
    """A multiple-choice row's right answer as its letter ("A" for the first), from a letter or a 0-based index;
    None without one. ConfigError when it names no option of the row's `choices` (any letter when it has none)."""
    if answer is None:
        return None
    letters = string.ascii_uppercase[: choices or 26]
    if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(letters):
        return letters[answer]
    if isinstance(answer, str) and answer.strip().upper() in letters and answer.strip():
        return answer.strip().upper()
    raise ConfigError(f"{where}: 'answer' must be the right choice's letter ({letters[0]}-{letters[-1]}) or its "
                      f"0-based index, got {answer!r}")  # fmt: skip


def _turns(turns: Any, where: str) -> Conversation:
    """ShareGPT turns -> one request per user turn, each with the history before it (() if none)."""
    if not isinstance(turns, list):
        raise ConfigError(f"{where}: 'conversations' must be a list of turns")
    history: list[dict[str, str]] = []
    requests: list[Request] = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise ConfigError(f"{where}: turn {index} is not an object")
        role = _ROLES.get(str(turn.get("from", turn.get("role", ""))).lower())
        content = turn.get("value", turn.get("content"))
        if role is None:
            raise ConfigError(f"{where}: turn {index}: 'from' must be one of {', '.join(sorted(_ROLES))}")
        if not isinstance(content, str):
            raise ConfigError(f"{where}: turn {index}: 'value' must be a string")
        history.append({"role": role, "content": content})
        if role == "user":
            requests.append({"messages": tuple(history)})
    return tuple(requests)


def _is_message(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("role"), str) and "content" in message


def _positive_int(value: Any, where: str, field: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or (isinstance(value, float) and value != number) or isinstance(value, bool):
        raise ConfigError(f"{where}: '{field}' must be a whole number >= 1, got {value!r}")
    return number
