"""Score (vLLM's `POST /v1/score`): `text_1`, the query (one more prompt text, `Api.query`), scored with each of
`text_2`, `--embedding-batch` documents; not streamed — one JSON object read whole by its body reader (`read_score`,
pure): `data`, one `{index, score}` per pair, and `usage.prompt_tokens`. Counted as rerank is, in documents
(`rerank.DOCUMENTS`: documents/s, input tokens/s and the E2E latency).
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.apis.registry import Api
from llm_locust.apis.rerank import DOCUMENTS, take_scores
from llm_locust.metrics.protocol import error_text
from llm_locust.metrics.record import ErrorKind, RequestRecord


def read_score(content: bytes, record: RequestRecord, inputs: int) -> None:
    """Check a score response body (`data`: `{index, score}` for each of the `inputs` pairs) and take its documents and
    usage onto `record`."""
    try:
        data = orjson.loads(content)
        scores, usage = data["data"], data.get("usage")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        record.fail(ErrorKind.BAD_STREAM, f"score response is not a score object: {error_text(content)}")
        return
    if type(scores) is list and len(scores) != inputs:
        record.fail(ErrorKind.BAD_STREAM, f"score response holds {len(scores)} scores for {inputs} documents")
        return
    take_scores(record, scores, "score", inputs, usage)


def shape(body: dict[str, Any]) -> None:
    """Score: the query as `text_1`, the texts as the `text_2` list."""
    body["text_1"], body["text_2"] = body.pop("query"), body.pop("texts")


API = Api(
    "score", "score", {"openai-compatible": "/v1/score"}, shape, max_tokens_field="", forces_length=False,
    read_body=read_score, counting=DOCUMENTS, inputs_field="text_2", query=True, user="ScoreUser",
)  # fmt: skip
