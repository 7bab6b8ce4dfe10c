"""The fast client's proxy, from the environment as curl, requests and httpx read it.

`HTTPS_PROXY` for https:// hosts (a CONNECT tunnel: TLS runs end to end, through it), `HTTP_PROXY`
for http:// hosts (requests in absolute form), `ALL_PROXY` for either, each also lower case;
`NO_PROXY` lists the hosts reached directly (names, domain suffixes, addresses, `*`). The
`openai-sdk` client (httpx) reads the same variables, so both clients take the same path.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from llm_locust.errors import ConfigError


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy: its address, optional Basic credentials, and what to call it in messages
    (`shown`: the variable and the URL without credentials)."""

    host: str
    port: int
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    shown: str = ""


def proxy_urls() -> list[str]:
    """Every proxy URL the environment names (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY ...), with a scheme."""
    return [url if "://" in url else f"http://{url}" for url in urllib.request.getproxies_environment().values()]


def env_proxy(host_url: str | None) -> Proxy | None:
    """The proxy the environment names for `host_url` (Locust's --host), None for a direct
    connection; ConfigError naming the variable when it is not an http:// proxy."""
    if not host_url:
        return None
    target = urlsplit(host_url)
    scheme = (target.scheme or "http").lower()
    proxies = urllib.request.getproxies_environment()
    url = proxies.get(scheme) or proxies.get("all")
    if not url or urllib.request.proxy_bypass_environment(target.netloc.rpartition("@")[2], proxies):
        return None
    variable = f"{scheme.upper()}_PROXY" if proxies.get(scheme) else "ALL_PROXY"
    parts = urlsplit(url if "://" in url else f"http://{url}")
    shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # no user name or password
    if parts.scheme.lower() != "http":
        raise ConfigError(
            f"{variable}={shown}: the fast client speaks to http:// proxies only (CONNECT for https:// hosts); "
            "use an http:// proxy URL, or --client openai-sdk"
        )
    try:
        port = parts.port or 80
    except ValueError:
        raise ConfigError(f"{variable}={shown}: not a valid port") from None
    if not parts.hostname:
        raise ConfigError(f"{variable}={shown}: names no proxy address, e.g. http://proxy.example.com:3128")
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return Proxy(parts.hostname, port, user, password, f"{variable}={shown}")
