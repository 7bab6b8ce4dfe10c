"""Redirects are never followed: a 3xx answer is the request's failure (`ErrorKind.REDIRECT`), in every client.

Following one would send the request — its body, the API key, the `--header` values — to a host the operator never
named, and measure that host instead (a 302 even turns the POST into a bodiless GET). The fast client's session
follows none (`runtime.users.LLMUser.max_redirects` 0: the model lookup and a scenario's own calls too), the openai
SDK's httpx client none (`follow_redirects=False`); the reason names where the server pointed, so that `--host` can
be set to the final URL (docs/security.md).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from llm_locust.redact import redact


def is_redirect(status: int) -> bool:
    """True for an HTTP status of the 3xx class."""
    return 300 <= status < 400


def redirect_reason(status: int, location: str | None) -> str:
    """One line saying that the answer `status` (3xx) pointing at `location` (its Location header; None: none) was
    not followed — the Location without its query, fragment nor credentials (they may carry tokens)."""
    if not location:
        return f"HTTP {status} redirect without a Location, not followed"
    parts = urlsplit(location.strip())
    shown = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
    return f"HTTP {status} redirect to {redact(shown)[:200]} not followed: point --host at the final URL"
