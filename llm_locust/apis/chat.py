"""Chat completions (`POST /v1/chat/completions`): the prompt as one user message; OpenAI chunks (`metrics.protocol`,
shared with text completions) with the answer's text in `delta.content`, its reasoning in `delta.reasoning_content` /
`delta.reasoning` and its tool calls in `delta.tool_calls`; tools as function tools, an agent step as an assistant
message with its `tool_calls` and a `role: "tool"` message per result; a structured output as `response_format`.
Served by the OpenAI-style providers, Vertex AI's OpenAI-compatible endpoint and Bedrock's `/openai/v1`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_locust.apis.registry import OPENAI_STREAM, Api, openai_paths
from llm_locust.apis.shapes import SCHEMA_NAME, ToolForms, prompt_as_messages
from llm_locust.metrics.protocol import apply_event
from llm_locust.metrics.record import ToolCall
from llm_locust.metrics.stream_text import openai_parts, openai_text

VERTEX_PATH = "/v1/projects/{project}/locations/{location}/endpoints/openapi/chat/completions"
"""Vertex AI's OpenAI-compatible chat completions (REST: projects.locations.endpoints.chat.completions, the endpoint
`openapi`), at `{location}-aiplatform.googleapis.com` (`aiplatform.googleapis.com` for the `global` location)."""


def _tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat completions' `tools`: each function schema as a function tool."""
    return [{"type": "function", "function": dict(tool)} for tool in tools]


def _step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Chat: an assistant message with its `tool_calls`, then a `role: "tool"` message per result (`tool_call_id`)."""
    functions = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
    ]
    answer = {"role": "assistant", "content": content or None, "tool_calls": functions}
    return [
        answer,
        *({"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, results, strict=True)),
    ]


def response_format(kind: str, schema: Mapping[str, Any], family: str) -> dict[str, Any]:
    """Chat's `response_format`: `{"type": "json_schema", "json_schema": {name, schema, strict}}` or `{"type":
    "json_object"}` (OpenAI, vLLM, SGLang, llama.cpp); TGI's grammar form `{"type": "json", "value": schema}`."""
    if family == "tgi":
        return {"response_format": {"type": "json", "value": schema if kind == "json_schema" else {"type": "object"}}}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True}}}  # fmt: skip


API = Api(
    "chat", "chat completions",
    {**openai_paths("/v1/chat/completions", azure="chat/completions"), "vertex": VERTEX_PATH,
     "bedrock": "/openai/v1/chat/completions"},
    prompt_as_messages, OPENAI_STREAM, family_max_tokens_fields={"openai": "max_completion_tokens"},
    parser=apply_event, event_text=openai_text, answer_parts=openai_parts, sdk_method="chat.completions",
    sdk_arguments=("model", "messages", "stream"), images=True, tools=ToolForms(_tools, _step),
    response_format=response_format, mount="chat.completions.create", user="ChatCompletionsUser",
    agent_user="ChatAgentUser",
)  # fmt: skip
