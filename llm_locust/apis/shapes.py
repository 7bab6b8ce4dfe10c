"""How a prompt becomes each API's request fields (`apis.Api.shape`): pure functions that change a body in place.

A streamed API's shape gets the prompt fields — `prompt` (a text) or `messages` (chat messages, from a dataset),
maybe more fields of a dataset entry — and leaves the API's own: chat `messages`, text completions `prompt`,
Responses `input` (the prompt text, or the messages), Anthropic Messages `messages` with the system messages moved
to its `system` field. An API that counts inputs (`Api.counts_outputs` False) gets `texts`, the list of its
`--embedding-batch` prompt texts: embeddings send them as `input`.

An API that takes tools (`apis.Api.tools`) shapes the neutral function schemas of `workload/tools.py` into its own
`tools` field: `chat_tools`, `responses_tools`, `messages_tools`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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


def chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat completions' `tools`: each function schema (`{"name", "description", "parameters"}`) as a function tool."""
    return [{"type": "function", "function": dict(tool)} for tool in tools]


def responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Responses API's `tools`: function tools with the schema's fields at the top."""
    return [{"type": "function", **tool} for tool in tools]


def messages_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic Messages' `tools`: name, description and the parameters' schema as `input_schema`."""
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def embeddings(body: dict[str, Any]) -> None:
    """Embeddings: the texts as the `input` list."""
    body["input"] = body.pop("texts")


def joined(messages: list[dict[str, Any]]) -> str:
    """The texts of `messages` joined by newlines (parts that are not text left out)."""
    return "\n".join(m["content"] for m in messages if isinstance(m["content"], str))
