"""A request's body, made one way for every request: a built-in user's (`builder.Workload`, the prompt already in the
API's shape) and a scenario's call (`runtime.llm_client`, its keyword arguments as given) alike.

The body is the request's own fields, then its model in the API's model field (an API naming the model in its path
has none: `providers.model_path`), then `--extra-body` merged deep (`merge_deep`: its values win, an object merges
into the body's object of that name, at any depth), then the API's fixed fields merged deep — a streamed API's
`stream: true` and `stream_options.include_usage`, which the measurements need, so no field can turn them off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_locust.apis import Api


def merge_deep(body: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Merge `extra` into `body` in place: each of its values replaces the body's, but an object merges into the body's
    object of that name, at any depth (the body's objects are copied, never changed: they may be shared)."""
    for name, value in extra.items():
        given = body.get(name)
        if isinstance(given, dict) and isinstance(value, Mapping):
            merged = dict(given)
            merge_deep(merged, value)
            body[name] = merged
        else:
            body[name] = value


def request_body(api: Api, fields: Mapping[str, Any], model: str, extra_body: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a request of `api` for `model` with its own `fields` (in the API's shape; a `model` among them is
    replaced): the model in the API's model field, `--extra-body` (`extra_body`) merged deep, the API's fixed fields
    merged deep last."""
    body = dict(fields)
    if api.model_field:
        body[api.model_field] = model
    merge_deep(body, extra_body)
    merge_deep(body, api.fixed_fields)
    return body
