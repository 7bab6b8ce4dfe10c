"""What an embeddings response body means for a `RequestRecord` (pure, no I/O): the body reader of the embeddings API
(`apis.Api.read_body`), which is not streamed — one JSON object, read whole.
"""

from __future__ import annotations

import orjson

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
