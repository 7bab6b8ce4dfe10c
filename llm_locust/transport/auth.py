"""What computes a request's auth headers when it is sent (`RequestAuth`), applied by `client.FastTransport` on top
of the fixed headers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class RequestAuth(Protocol):
    """The auth headers of one request, computed when it is sent: a current bearer token, or a signature over the URL and body."""  # noqa: E501

    def headers(self, method: str, url: str, body: bytes) -> Mapping[str, str]: ...
