"""The APIs the simulator serves, one module each — its request parsing and its events — and the route table.

`wire` holds what they share: the request's JSON and model check, the length rules, the error body, `Api`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llm_locust.sim.apis import chat, completions, embeddings, messages, responses
from llm_locust.sim.apis.wire import Api, CompletionSpec, Encoder, Endpoint, decode_request

APIS: tuple[Api, ...] = (chat.API, completions.API, responses.API, messages.API, embeddings.API)
BY_PATH: dict[str, Api] = {api.path: api for api in APIS}
BY_ENDPOINT: dict[Endpoint, Api] = {api.endpoint: api for api in APIS}


def parse_request(
    body: bytes, endpoint: Endpoint, models: tuple[str, ...], natural_tokens: int
) -> tuple[CompletionSpec, dict[str, Any]]:
    """Validate a request body for `endpoint` served as one of `models` (the first when it names none): its spec and
    its JSON object; raise ApiError (400 / 404) if it is unacceptable."""
    data = decode_request(body, models)
    return replace(BY_ENDPOINT[endpoint].parse(data, natural_tokens), model=data["model"]), data


def parse_completion(body: bytes, endpoint: Endpoint, models: tuple[str, ...], natural_tokens: int) -> CompletionSpec:
    """The spec of a request body (`parse_request`)."""
    return parse_request(body, endpoint, models, natural_tokens)[0]


def encoder_of(spec: CompletionSpec) -> Callable[[CompletionSpec, str, int, str, int], Encoder]:
    """The encoder factory for `spec`: its API's tool-call encoder when it answers with a tool call, its answer
    encoder when it carries a settled-on-the-way answer (`sim.answers`), else its text encoder."""
    api = BY_ENDPOINT[spec.endpoint]
    if spec.tool_call is not None and api.tool_encoder is not None:
        return api.tool_encoder
    if spec.answer is not None and api.answer_encoder is not None:
        return api.answer_encoder
    return api.encoder
