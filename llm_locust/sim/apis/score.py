"""vLLM's score API (`POST /v1/score`): its request and its one JSON response, never streamed.

The request: `text_1` and `text_2`, each a non-empty string or a non-empty list of strings — one `text_1` is scored
with each `text_2` (1:N), or the lists pair up one by one (N:N, the same length). Each pair's prompt tokens are the
words of both texts (at least 1). It "generates" one token: the moment its scores are ready (after the prefill). The
response holds `data`, `{index, object: "score", score}` per pair (pair i scores 1 / (i + 1)), and `usage`
(`prompt_tokens`, `total_tokens`, `completion_tokens` 0), as vLLM sends it.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.completions import ChunkEncoder
from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request


def _texts(data: dict[str, Any], field: str) -> list[str]:
    """The texts of `field` (a string: one); ApiError unless a non-empty string or list of strings."""
    value = data.get(field)
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) and text for text in texts):
        raise bad_request(f"'{field}' must be a non-empty string or a non-empty list of them")
    return texts


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a score request `data` (ApiError if it is unacceptable): its pairs as `inputs`; `natural_tokens`
    is not used."""
    first, second = _texts(data, "text_1"), _texts(data, "text_2")
    if len(first) == 1:
        first = first * len(second)
    elif len(first) != len(second):
        raise bad_request(f"'text_1' holds {len(first)} texts, 'text_2' {len(second)}: give one, or as many")
    words = sum(max(len(a.split()) + len(b.split()), 1) for a, b in zip(first, second, strict=True))
    return CompletionSpec(stream=False, include_usage=False, prompt_tokens=words, output_tokens=1, finish_reason="stop",
                          inputs=len(second))  # fmt: skip


class ScoreEncoder(ChunkEncoder):
    """The response of one score request: only `body` is ever written (a fault's stream never starts, as the request
    is not streamed)."""

    __slots__ = ()

    def body(self) -> bytes:
        """Return the score response JSON: one score per pair, its usage."""
        spec = self.spec
        data = [{"index": i, "object": "score", "score": round(1.0 / (i + 1), 6)} for i in range(spec.inputs)]
        usage = {"prompt_tokens": spec.prompt_tokens, "total_tokens": spec.prompt_tokens, "completion_tokens": 0}
        return orjson.dumps({"id": self._id, "object": "list", "created": self._created_s, "model": self._model,
                             "data": data, "usage": usage})  # fmt: skip


API = Api(
    name="score",
    paths=("/v1/score",),  # vLLM's (it serves /score too, outside the /v1/ prefix the credentials guard)
    id_prefix="score",
    parse=parse,
    encoder=ScoreEncoder,
)
