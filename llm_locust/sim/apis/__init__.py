"""The APIs the simulator serves, one module each — its request parsing and its events — and the route table.

`wire` holds what they share: the request's JSON and model check, the length rules, the error body, `Api`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from llm_locust.sim.apis import chat, completions, converse, embeddings, gemini, messages, responses
from llm_locust.sim.apis.wire import Api, CompletionSpec, Encoder, Endpoint, bad_request, decode_request

APIS: tuple[Api, ...] = (
    chat.API, completions.API, responses.API, messages.API, gemini.API, converse.API, embeddings.API
)  # fmt: skip
MODEL_PATHS: tuple[tuple[re.Pattern[str], Api], ...] = (
    (gemini.PATH, gemini.API),
    (re.compile(re.escape(converse.API.path).replace(re.escape("{model}"), "(?P<model>[^/]+)")), converse.API),
)
"""The APIs whose paths name the model (its `model` group), served at every path their pattern matches (Gemini's:
with `alt=sse` in the query only)."""
BY_PATH: dict[str, Api] = {api.path: api for api in APIS if all(api is not other for _, other in MODEL_PATHS)}
BY_ENDPOINT: dict[Endpoint, Api] = {api.endpoint: api for api in APIS}
BEDROCK_CHAT_PATH = "/openai/v1/chat/completions"
"""Bedrock's OpenAI-compatible chat completions (its runtime's `/openai/v1`), served as chat."""
BY_PATH[BEDROCK_CHAT_PATH] = chat.API


def route(path: str, query: str) -> tuple[Api | None, str | None]:
    """The API served at `path` (None: none) and the model the path names (None: the body names it); ApiError (400)
    for a path naming the model without `alt=sse` in its `query`."""
    api = BY_PATH.get(path)
    if api is not None:
        return api, None
    for pattern, api in MODEL_PATHS:
        found = pattern.fullmatch(path)
        if found is not None:
            if api is gemini.API and "alt=sse" not in query.split("&"):
                raise bad_request(f"{path}: this simulator streams with ?alt=sse only")
            return api, unquote(found["model"])
    return None, None


def parse_request(
    body: bytes, endpoint: Endpoint, models: tuple[str, ...], natural_tokens: int, path_model: str | None = None
) -> tuple[CompletionSpec, dict[str, Any]]:
    """Validate a request body for `endpoint` served as one of `models` — the path's `path_model` (the body may not
    name one then), else the body's, else the first: its spec and its JSON object; raise ApiError (400 / 404) if it
    is unacceptable."""
    data = decode_request(body, models, path_model)
    return replace(BY_ENDPOINT[endpoint].parse(data, natural_tokens), model=path_model or data["model"]), data


def parse_completion(
    body: bytes, endpoint: Endpoint, models: tuple[str, ...], natural_tokens: int, path_model: str | None = None
) -> CompletionSpec:
    """The spec of a request body (`parse_request`)."""
    return parse_request(body, endpoint, models, natural_tokens, path_model)[0]


def encoder_of(spec: CompletionSpec) -> Callable[[CompletionSpec, str, int, str, int], Encoder]:
    """The encoder factory for `spec`: its API's tool-call encoder when it answers with a tool call, its answer
    encoder when it carries a settled-on-the-way answer (`sim.answers`), else its text encoder."""
    api = BY_ENDPOINT[spec.endpoint]
    if spec.tool_call is not None and api.tool_encoder is not None:
        return api.tool_encoder
    if spec.answer is not None and api.answer_encoder is not None:
        return api.answer_encoder
    return api.encoder
