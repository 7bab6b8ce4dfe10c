"""The rerank API (`POST /v1/rerank`, also `/v2/rerank`, as vLLM serves them): its request and its one
JSON response, never streamed.

The request: a non-empty string `query`, a non-empty list `documents` (strings, or `{"text": ...}` objects as Jina and
Cohere take them), an optional positive `top_n`. Each document is scored with the query (a cross-encoder's pair), so
its prompt tokens are the words of the query and of each document, per document (at least 1 each). It "generates" one
token: the moment its scores are ready (after the prefill). The response holds `results`, `{index, relevance_score}`
by falling score (document i scores 1 / (i + 1)), `top_n` of them when asked, and `usage` (`prompt_tokens` and
`total_tokens`, as vLLM's newer servers and Jina send it).
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.completions import ChunkEncoder
from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request


def pair_words(query: str, documents: list[str]) -> int:
    """The prompt tokens of scoring `query` with each of `documents`: the words of both, per pair (at least 1)."""
    words = len(query.split())
    return sum(max(words + len(document.split()), 1) for document in documents)


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a rerank request `data` (ApiError if it is unacceptable): its documents as `inputs`, its `top_n` as
    the most results it answers (`max_tokens`); `natural_tokens` is not used."""
    query, documents, top_n = data.get("query"), data.get("documents"), data.get("top_n")
    if not isinstance(query, str) or not query:
        raise bad_request("'query' must be a non-empty string")
    if not isinstance(documents, list) or not documents:
        raise bad_request("'documents' must be a non-empty list of strings or {'text': ...} objects")
    texts = [document.get("text") if isinstance(document, dict) else document for document in documents]
    if not all(isinstance(text, str) for text in texts):
        raise bad_request("'documents' must be a non-empty list of strings or {'text': ...} objects")
    if top_n is not None and (type(top_n) is not int or top_n < 1):
        raise bad_request("'top_n' must be a positive integer")
    return CompletionSpec(stream=False, include_usage=False, prompt_tokens=pair_words(query, texts), output_tokens=1,
                          finish_reason="stop", inputs=len(texts), max_tokens=top_n)  # fmt: skip


class RerankEncoder(ChunkEncoder):
    """The response of one rerank request: only `body` is ever written (a fault's stream never starts, as the request
    is not streamed)."""

    __slots__ = ()

    def body(self) -> bytes:
        """Return the rerank response JSON: the documents' results by falling score (`top_n` of them), its usage."""
        spec = self.spec
        ranked = range(min(spec.inputs, spec.max_tokens or spec.inputs))
        results = [{"index": i, "relevance_score": round(1.0 / (i + 1), 6)} for i in ranked]
        usage = {"prompt_tokens": spec.prompt_tokens, "total_tokens": spec.prompt_tokens}
        return orjson.dumps({"id": self._id, "model": self._model, "usage": usage, "results": results})


API = Api(
    name="rerank",
    paths=("/v1/rerank", "/v2/rerank"),  # vLLM's (Jina's; Cohere's v2)
    id_prefix="rerank",
    parse=parse,
    encoder=RerankEncoder,
)
