"""The paths the clouds serve OpenAI's chat and text completions and embeddings under, mapped to the simulator's own.

Azure OpenAI: `/openai/deployments/{deployment}/chat/completions` (`completions`, `embeddings`) with `?api-version=`;
Databricks: `/serving-endpoints/{name}/invocations` (chat); Vertex AI's OpenAI-compatible endpoint:
`/v1/projects/{project}/locations/{location}/endpoints/openapi/chat/completions` (and `v1beta1`).
"""

from __future__ import annotations

import re

_CLOUD_PATHS = (
    (re.compile(r"/openai/deployments/[^/]+/(chat/completions|completions|embeddings)"), r"/v1/\1"),
    (re.compile(r"/serving-endpoints/[^/]+/invocations"), "/v1/chat/completions"),
    (re.compile(r"/v1(?:beta1)?/projects/[^/]+/locations/[^/]+/endpoints/openapi/chat/completions"),
     "/v1/chat/completions"),
)  # fmt: skip


def served_path(path: str) -> str:
    """The simulator's own path for a cloud's `path` (Azure, Databricks, Vertex AI); any other path as it is."""
    for pattern, own in _CLOUD_PATHS:
        if pattern.fullmatch(path):
            return pattern.sub(own, path)
    return path
