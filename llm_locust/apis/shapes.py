"""What the APIs' shapes share (`apis.Api.shape`: pure functions that change a body in place; each API's own is in
its module).

A streamed API's shape gets the prompt fields — `prompt` (a text) or `messages` (chat messages, from a dataset),
maybe more fields of a dataset entry — and leaves the API's own; `prompt_as_messages` makes the prompt one user
message, `content_texts` reads a message's texts, `joined` joins the messages' texts into one prompt. An API that counts
inputs (`Api.counts_outputs` False) gets `texts`, the list of its `--embedding-batch` prompt texts, and `query`, one
more prompt text, if it takes one (`Api.query`).

An API that takes tools has its `ToolForms` (`apis.Api.tools`): the neutral function schemas of `workload/tools.py`
in its own `tools` field, and an agent step's tool calls and results in its own history messages. An API that takes
a structured output (`--response-format`, one of `RESPONSE_FORMATS`) has its `ResponseFormat`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_locust.metrics.record import ToolCall


def prompt_as_messages(body: dict[str, Any]) -> None:
    """The prompt (if the body has one) as one user message."""
    if "prompt" in body:
        body["messages"] = [{"role": "user", "content": body.pop("prompt")}]


def content_texts(content: Any) -> list[str]:
    """The texts of a chat message's content: the string, or its text parts."""
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content or () if isinstance(part, dict) and isinstance(part.get("text"), str)]


def joined(messages: list[dict[str, Any]]) -> str:
    """The texts of `messages` joined by newlines (parts that are not text left out)."""
    return "\n".join(m["content"] for m in messages if isinstance(m["content"], str))


@dataclass(frozen=True)
class ToolForms:
    """How an API takes tools (`apis.Api.tools`): `schemas` shapes the neutral function schemas (`{"name",
    "description", "parameters"}`, `workload/tools.py`) into its `tools` field; `step(content, calls, results)` makes
    the history messages of one agent step in its own form — the assistant's answer (its text `content`, maybe "",
    and its tool `calls`) and each call's result text (`results`, in the calls' order)."""

    schemas: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]]
    step: Callable[[str, Sequence[ToolCall], Sequence[str]], list[dict[str, Any]]]


RESPONSE_FORMATS = ("json_schema", "json_object")
"""The kinds of `--response-format`: an answer valid for a JSON schema, or any JSON object."""
SCHEMA_NAME = "answer"
"""The name a JSON schema is sent under where the API asks for one (chat, Responses)."""

ResponseFormat = Callable[[str, Mapping[str, Any], str], dict[str, Any]]
"""An API's structured-output fields (`apis.Api.response_format`): (kind — one of `RESPONSE_FORMATS` —, the JSON
schema, the server family) → the body fields that ask for it; ConfigError when the family's server takes none."""
