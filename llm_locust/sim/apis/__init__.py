"""The APIs the simulator serves, one module each — its request parsing and its events — and the route table.

`wire` holds what they share: the request's JSON and model check, the length rules, the error body, `Api`.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_locust.sim.apis import chat, completions, embeddings, messages, responses
from llm_locust.sim.apis.wire import Api, CompletionSpec, Encoder, Endpoint, decode_request

APIS: tuple[Api, ...] = (chat.API, completions.API, responses.API, messages.API, embeddings.API)
BY_PATH: dict[str, Api] = {api.path: api for api in APIS}
BY_ENDPOINT: dict[Endpoint, Api] = {api.endpoint: api for api in APIS}


def parse_completion(body: bytes, endpoint: Endpoint, model: str, natural_tokens: int) -> CompletionSpec:
    """Validate a request body for `endpoint` served as `model`; raise ApiError (400 / 404) if it is unacceptable."""
    return BY_ENDPOINT[endpoint].parse(decode_request(body, model), natural_tokens)


def encoder_of(spec: CompletionSpec) -> Callable[[CompletionSpec, str, int, str, int], Encoder]:
    """The encoder factory for `spec`: its API's tool-call encoder when it answers with a tool call, else its text
    encoder."""
    api = BY_ENDPOINT[spec.endpoint]
    return api.tool_encoder if spec.tool_call is not None and api.tool_encoder is not None else api.encoder
