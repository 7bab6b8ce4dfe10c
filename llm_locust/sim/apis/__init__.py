"""The APIs the simulator serves, one module each — its request parsing and its events — and the route table.

`wire` holds what they share: the request's JSON and model check, the length rules, the error body, `Api`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import unquote

from llm_locust.sim.apis import chat, completions, converse, embeddings, messages, responses
from llm_locust.sim.apis.wire import Api, CompletionSpec, Encoder, Endpoint, decode_request

APIS: tuple[Api, ...] = (chat.API, completions.API, responses.API, messages.API, converse.API, embeddings.API)
BY_PATH: dict[str, Api] = {api.path: api for api in APIS if "{model}" not in api.path}
BY_ENDPOINT: dict[Endpoint, Api] = {api.endpoint: api for api in APIS}
BEDROCK_CHAT_PATH = "/openai/v1/chat/completions"
"""Bedrock's OpenAI-compatible chat completions (its runtime's `/openai/v1`), served as chat."""
BY_PATH[BEDROCK_CHAT_PATH] = chat.API
_MODEL_PATHS = tuple(
    (re.compile(re.escape(api.path).replace(re.escape("{model}"), "([^/]+)")), api)
    for api in APIS
    if "{model}" in api.path
)


def route(path: str) -> tuple[Api, str | None] | None:
    """The API served at `path` and the model its path names (None: its body does), or None."""
    api = BY_PATH.get(path)
    if api is not None:
        return api, None
    for pattern, named in _MODEL_PATHS:
        found = pattern.fullmatch(path)
        if found:
            return named, unquote(found[1])
    return None


def parse_completion(
    body: bytes, endpoint: Endpoint, models: tuple[str, ...], natural_tokens: int, path_model: str | None = None
) -> CompletionSpec:
    """Validate a request body for `endpoint` served as one of `models` (the path's `path_model`, else the body's, else
    the first); raise ApiError (400 / 404) if it is unacceptable."""
    data = decode_request(body, models, path_model)
    return replace(BY_ENDPOINT[endpoint].parse(data, natural_tokens), model=path_model or data["model"])


def encoder_of(spec: CompletionSpec) -> Callable[[CompletionSpec, str, int, str, int], Encoder]:
    """The encoder factory for `spec`: its API's tool-call encoder when it answers with a tool call, else its text
    encoder."""
    api = BY_ENDPOINT[spec.endpoint]
    return api.tool_encoder if spec.tool_call is not None and api.tool_encoder is not None else api.encoder
