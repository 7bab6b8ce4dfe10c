"""Rerank (`POST /v1/rerank`, the request vLLM, Jina, Cohere and llama.cpp's server share): a `query` and
`--embedding-batch` `documents` (the query one more prompt text, `Api.query`); not streamed — one JSON object, read
whole by its body reader (`read_rerank`, pure): `results`, one `{index, relevance_score}` per document ranked (`top_n`
of them when the request asks), and `usage`. What a run of it counts is documents (`DOCUMENTS`: documents/s, input
tokens/s and the E2E latency), a counting the score API shares.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.apis.registry import Api, Counting, Rate
from llm_locust.metrics.protocol import check_usage, error_text
from llm_locust.metrics.record import ErrorKind, RequestRecord

DOCUMENTS = Counting(
    "documents",
    (Rate("inputs_per_s", "documents/s", "Documents/s"), Rate("input_tokens_per_s", "input tok/s", "Input tokens/s")),
    (("e2e", "Latency"),),
)
"""What a run of a ranking API counts: the documents it scored, and their tokens (the query's counted with each, as
the server counts them); its latency is E2E."""


def usage_tokens(usage: Any) -> int | None:
    """The input tokens a ranking response's `usage` counts: `prompt_tokens` (vLLM's score, Jina), else `total_tokens`
    (vLLM's and llama.cpp's rerank); None when it has neither (Cohere bills search units)."""
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "total_tokens"):
        value = usage.get(key)
        if type(value) is int:
            return value
    return None


def take_scores(record: RequestRecord, items: Any, field: str, inputs: int, usage: Any) -> None:
    """Check a ranking response's scored `items` (each `{index, <field>}`: an index below `inputs`, each once, a
    number) — at least one, at most one per document (fewer when the request asked for its `top_n`) — and take the
    documents and the usage's tokens onto `record`; else fail it as a bad stream."""
    if type(items) is not list or not 0 < len(items) <= inputs:
        got = len(items) if type(items) is list else type(items).__name__
        record.fail(ErrorKind.BAD_STREAM, f"ranking response holds {got} scores for {inputs} documents")
        return
    seen: set[int] = set()
    for item in items:
        index, score = (item.get("index"), item.get(field)) if type(item) is dict else (None, None)
        if type(index) is not int or not 0 <= index < inputs or index in seen or type(score) not in (int, float):
            record.fail(ErrorKind.BAD_STREAM, f"ranking response holds a bad score: {error_text(orjson.dumps(item))}")
            return
        seen.add(index)
    record.inputs = inputs
    tokens = usage_tokens(usage)
    if tokens is not None:
        record.prompt_tokens = tokens
        check_usage(record)


def read_rerank(content: bytes, record: RequestRecord, inputs: int) -> None:
    """Check a rerank response body (`results`: `{index, relevance_score}` per document ranked) and take its documents
    and usage onto `record`."""
    try:
        data = orjson.loads(content)
        results, usage = data["results"], data.get("usage")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        record.fail(ErrorKind.BAD_STREAM, f"rerank response is not a rerank object: {error_text(content)}")
        return
    take_scores(record, results, "relevance_score", inputs, usage)


def shape(body: dict[str, Any]) -> None:
    """Rerank: the query (already the body's), the texts as the `documents` list."""
    body["documents"] = body.pop("texts")


API = Api(
    "rerank", "rerank", {"openai-compatible": "/v1/rerank"}, shape, max_tokens_field="", forces_length=False,
    read_body=read_rerank, counting=DOCUMENTS, inputs_field="documents", query=True, user="RerankUser",
)  # fmt: skip
