"""The APIs the simulator serves — one module of this package each, declaring its `API` (`wire.Api`: its paths,
request parsing and events) — and their registry: the route table, each request's parsing and its encoder.

Every module of this package that declares an `API` is registered as it is imported (`APIS`), so another API is one
more module and no list names it; the timing, the faults and the trace come with it. `wire` holds what they share:
the request's JSON and model check, the length rules, the error body, `Api`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from importlib import import_module
from pkgutil import iter_modules
from typing import Any
from urllib.parse import unquote

from llm_locust.sim.apis.wire import Api, CompletionSpec, Encoder, bad_request, decode_request


def _declared() -> tuple[Api, ...]:
    """The `API` of each module of this package that declares one, by module name."""
    found = (getattr(import_module(f"{__name__}.{module.name}"), "API", None) for module in iter_modules(__path__))
    return tuple(entry for entry in found if isinstance(entry, Api))


APIS = _declared()
"""The APIs the simulator serves."""
BY_NAME: dict[str, Api] = {api.name: api for api in APIS}
_PLACE = re.compile(r"\{(\w+)\}")


def _pattern(path: str) -> re.Pattern[str]:
    """The pattern of an `Api.paths` entry: its `{model}` the `model` group, any other `{...}` one path segment."""
    parts = _PLACE.split(path)  # literal, place name, literal, ...
    return re.compile("".join(
        re.escape(part) if i % 2 == 0 else "(?P<model>[^/]+)" if part == "model" else "[^/]+"
        for i, part in enumerate(parts)
    ))  # fmt: skip


def by_path(apis: tuple[Api, ...]) -> dict[str, Api]:
    """The API served at each fixed path of `apis`: its own, or — a path two declare — the one that serves the other
    too (`Api.serves_too`); ValueError for a path two declare and neither serves the other."""
    table: dict[str, Api] = {}
    for api in apis:
        for path in (path for path in api.paths if "{" not in path):
            held = table.setdefault(path, api)
            if held is not api and held.name not in api.serves_too:
                if api.name not in held.serves_too:
                    raise ValueError(f"{path}: declared by {held.name} and {api.name}, neither serving the other")
                continue
            table[path] = api
    return table


BY_PATH: dict[str, Api] = by_path(APIS)
"""The APIs served at fixed paths."""
PATTERNS: tuple[tuple[re.Pattern[str], Api], ...] = tuple(
    (_pattern(path), api) for api in APIS for path in api.paths if "{" in path
)
"""The APIs served at paths with places in them (a cloud's deployment, the model: its `model` group)."""
PREFIXES: tuple[str, ...] = tuple(dict.fromkeys(f"/{path.split('/')[1]}/" for api in APIS for path in api.paths))
"""The first segments of the APIs' paths (`/v1/`, `/openai/`, `/serving-endpoints/`, `/v1beta1/`, `/model/`,
`/v1beta/`): with `--api-key` or `--sigv4`, a request to any path under them must carry the credentials (`server`)."""


def route(path: str, query: str) -> tuple[Api | None, str | None]:
    """The API served at `path` (None: none) and the model the path names (None: the body names it); ApiError (400)
    when the `query` lacks the parameter the API requires (`Api.query`: Gemini's `alt=sse`)."""
    api, model = BY_PATH.get(path), None
    if api is None:
        for pattern, candidate in PATTERNS:
            found = pattern.fullmatch(path)
            if found is not None:
                api, model = candidate, unquote(found["model"]) if "model" in pattern.groupindex else None
                break
    if api is not None and api.query and api.query not in query.split("&"):
        raise bad_request(f"{path}: this simulator streams with ?{api.query} only")
    return api, model


def parse_request(
    body: bytes,
    endpoint: str,
    models: tuple[str, ...],
    natural_tokens: int,
    path_model: str | None = None,
    content_type: str = "application/json",
) -> tuple[CompletionSpec, dict[str, Any]]:
    """Validate a request body for the API named `endpoint` (of `content_type`, read by the API's `Api.decode`: JSON,
    or a multipart form), served as one of `models` — the path's `path_model` (the body may not name one then), else
    the body's, else the first: its spec and its fields; raise ApiError (400 / 404) if it is unacceptable."""
    api = BY_NAME[endpoint]
    data = decode_request(api.decode(body, content_type), models, path_model)
    spec = api.parse(data, natural_tokens)
    return replace(spec, model=path_model or data["model"], endpoint=endpoint), data


def parse_completion(
    body: bytes,
    endpoint: str,
    models: tuple[str, ...],
    natural_tokens: int,
    path_model: str | None = None,
    content_type: str = "application/json",
) -> CompletionSpec:
    """The spec of a request body (`parse_request`)."""
    return parse_request(body, endpoint, models, natural_tokens, path_model, content_type)[0]


def encoder_of(spec: CompletionSpec) -> Callable[[CompletionSpec, str, int, str, int], Encoder]:
    """The encoder factory for `spec`: its API's tool-call encoder when it answers with a tool call, its answer
    encoder when it carries a settled-on-the-way answer (`sim.answers`), else its text encoder."""
    api = BY_NAME[spec.endpoint]
    if spec.tool_call is not None and api.tool_encoder is not None:
        return api.tool_encoder
    if spec.answer is not None and api.answer_encoder is not None:
        return api.answer_encoder
    return api.encoder
