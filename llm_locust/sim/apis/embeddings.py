"""The embeddings API (`POST /v1/embeddings`): its request and its one JSON response, never streamed.

The request's `input`: a string or a non-empty list of strings, each counted as its words (at least 1). It
"generates" one token: the moment its vectors are ready (after the prefill). The response holds one short vector per
input and `usage.prompt_tokens`.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_locust.sim.apis.completions import ChunkEncoder
from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request

DIMENSIONS = 8
"""The length of every vector."""


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of an embeddings request `data` (ApiError if it is unacceptable); `natural_tokens` is not used."""
    item = data.get("input")
    texts = [item] if isinstance(item, str) else item
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise bad_request("'input' must be a string or a non-empty list of strings")
    words = sum(max(len(text.split()), 1) for text in texts)
    return CompletionSpec(stream=False, include_usage=False, prompt_tokens=words, output_tokens=1, finish_reason="stop",
                          inputs=len(texts))  # fmt: skip


class EmbeddingsEncoder(ChunkEncoder):
    """The response of one embeddings request: only `body` is ever written (a fault's stream never starts, as the
    request is not streamed)."""

    __slots__ = ()

    def body(self) -> bytes:
        """Return the embeddings response JSON: one `DIMENSIONS`-long vector per input, usage.prompt_tokens."""
        spec = self.spec
        vector = [round(1.0 / (1 + i), 4) for i in range(DIMENSIONS)]
        data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(spec.inputs)]
        usage = {"prompt_tokens": spec.prompt_tokens, "total_tokens": spec.prompt_tokens}
        return orjson.dumps({"object": "list", "data": data, "model": self._model, "usage": usage})


API = Api(
    name="embeddings",
    paths=("/v1/embeddings", "/openai/deployments/{deployment}/embeddings"),  # OpenAI's, Azure OpenAI's
    id_prefix="emb",
    parse=parse,
    encoder=EmbeddingsEncoder,
)
