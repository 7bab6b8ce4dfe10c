"""Structured outputs (`--response-format`): the JSON schema a request's answer must satisfy, and its reference.

With `--response-format json_schema` each request asks for an answer valid for a JSON schema — its dataset row's own
`schema` (a built-in `builtin:json` item's, a file's), else the `--schema` file's — in its API's own field
(`apis.Api.response_format`), and its `scoring.Reference` carries that schema, so that the answer is scored for
validity; with `json_object`, any JSON object (the schema `{"type": "object"}`, or the row's own). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from llm_locust.errors import ConfigError
from llm_locust.metrics.scoring import Reference, schema_problem

ANY_OBJECT: Mapping[str, Any] = {"type": "object"}
"""The schema a `json_object` answer is checked against when its row has none."""


@lru_cache(maxsize=4)
def load_schema(path: str) -> Mapping[str, Any]:
    """The JSON schema of the `--schema` file `path`; ConfigError naming the option and the file."""
    try:
        schema = orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise ConfigError(f"--schema {path}: {e.strerror or e}") from None
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"--schema {path}: not JSON ({e.msg} at line {e.lineno})") from None
    problem = schema_problem(schema)
    if problem:
        raise ConfigError(f"--schema {path}: {problem}")
    return schema


def answer_reference(reference: Reference | None, kind: str, schema: Mapping[str, Any] | None) -> Reference | None:
    """The reference of a request whose row has `reference` (None: none), under `--response-format` `kind` ("" for
    none: `reference` as it is) with the `--schema` file's `schema` (None: none): the row's own schema, else
    `schema` (json_schema) or `ANY_OBJECT` (json_object), with the row's other checks."""
    if not kind:
        return reference
    own = reference.schema if reference is not None else None
    wanted = own or (schema if kind == "json_schema" else ANY_OBJECT)
    return replace(reference or Reference(), schema=wanted)
