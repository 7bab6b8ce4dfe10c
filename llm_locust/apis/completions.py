"""Text completions (`POST /v1/completions`): the messages' texts joined into one prompt; OpenAI chunks
(`metrics.protocol`, shared with chat) with the answer's text in `text`; a structured output in a field of the server
family's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from llm_locust.apis.registry import OPENAI_STREAM, Api, openai_paths
from llm_locust.apis.shapes import joined
from llm_locust.errors import ConfigError
from llm_locust.metrics.protocol import apply_event
from llm_locust.metrics.stream_text import openai_parts, openai_text


def shape(body: dict[str, Any]) -> None:
    """Text completions: the messages' texts joined into one prompt."""
    if "messages" in body:
        body["prompt"] = joined(body.pop("messages"))


def response_format(kind: str, schema: Mapping[str, Any], family: str) -> dict[str, Any]:
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


API = Api(
    "completions", "text completions", openai_paths("/v1/completions", azure="completions"), shape, OPENAI_STREAM,
    parser=apply_event, event_text=openai_text, answer_parts=openai_parts, sdk_method="completions",
    sdk_arguments=("model", "prompt", "stream"), response_format=response_format, user="CompletionsUser",
)  # fmt: skip
