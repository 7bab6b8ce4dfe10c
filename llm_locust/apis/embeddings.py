"""Embeddings (`POST /v1/embeddings`): `--embedding-batch` texts as the `input` list; not streamed — one JSON object,
read whole by its body reader (`apis.Api.read_body`, pure); what a run of it counts is inputs (`INPUTS`).
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.apis.registry import INPUTS, Api, openai_paths
from llm_locust.metrics.protocol import check_usage, error_text
from llm_locust.metrics.record import ErrorKind, RequestRecord


def read_embeddings(content: bytes, record: RequestRecord, inputs: int) -> None:
    """Check an embeddings response body (`data`: one embedding per input) and take its usage onto `record`."""
    try:
        data = orjson.loads(content)
        embeddings, usage = data["data"], data.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        record.fail(
            ErrorKind.BAD_STREAM, f"embeddings response is not an OpenAI embeddings object: {error_text(content)}"
        )
        return
    if type(embeddings) is not list or len(embeddings) != inputs:
        got = len(embeddings) if type(embeddings) is list else type(embeddings).__name__
        record.fail(ErrorKind.BAD_STREAM, f"embeddings response holds {got} embeddings for {inputs} inputs")
        return
    record.inputs = inputs
    if type(prompt_tokens) is int and prompt_tokens >= 0:
        record.prompt_tokens = prompt_tokens
        check_usage(record)


def shape(body: dict[str, Any]) -> None:
    """Embeddings: the texts as the `input` list."""
    body["input"] = body.pop("texts")


API = Api(
    "embeddings", "embeddings", openai_paths("/v1/embeddings", azure="embeddings"), shape, max_tokens_field="",
    read_body=read_embeddings, counting=INPUTS, user="EmbeddingsUser",
)  # fmt: skip
