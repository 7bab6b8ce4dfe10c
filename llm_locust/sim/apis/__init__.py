"""The APIs the simulator serves, one module each — its request parsing and its events — and the route table.

`wire` holds what they share: the request's JSON and model check, the length rules, the error body, `Api`.
"""

from __future__ import annotations

from dataclasses import replace

from llm_locust.sim.apis import chat, completions, embeddings, messages, responses
from llm_locust.sim.apis.wire import Api, CompletionSpec, Endpoint, decode_request

APIS: tuple[Api, ...] = (chat.API, completions.API, responses.API, messages.API, embeddings.API)
BY_PATH: dict[str, Api] = {api.path: api for api in APIS}
BY_ENDPOINT: dict[Endpoint, Api] = {api.endpoint: api for api in APIS}


def parse_completion(body: bytes, endpoint: Endpoint, models: tuple[str, ...], natural_tokens: int) -> CompletionSpec:
    """Validate a request body for `endpoint` served as one of `models` (the first when it names none); raise
    ApiError (400 / 404) if it is unacceptable."""
    data = decode_request(body, models)
    return replace(BY_ENDPOINT[endpoint].parse(data, natural_tokens), model=data["model"])
