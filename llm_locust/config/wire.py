"""What of a run's options crosses the master–worker wire: everything but the secrets, and the secrets' names.

Locust's master sends its options to the workers in every spawn message, over a ZeroMQ port without authentication.
So the master sends no secret value: not the API key, no `--header` value, no credentials of a `--host` URL, no
`--metrics-url` (`wire_options`). It sends what it has instead (`SecretNames`: the key's variable, the header
names, which host URLs carry credentials), and each worker takes the values from its own command line, config file
and environment — the key from the variable `--api-key-env` names (or the provider's default, e.g. OPENAI_API_KEY),
the headers from its own `--header` options, URL credentials from its own `--host` (`with_credentials`) — and
refuses the test with one line naming what to set when it lacks one (`missing_secrets`).

A worker's own choice of where its requests go and which credentials they carry is the truth: the `--host`,
`--provider` and `--api-key-env` it names itself (`Target`; what it leaves out it takes from its master) — and its
`--header` names, always compared — must be the master's, or it refuses the test in one line naming the option that
differs (`foreign_target`; never a value of a secret) and sends nothing: a master cannot point a worker's key at
another server.

Pure: the wiring is `runtime.secret_wire`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from llm_locust.config.options import SECRET_OPTIONS
from llm_locust.transport.endpoint_settings import DEFAULT_PROVIDER, EndpointSettings
from llm_locust.transport.replicas import host_refusal, split_hosts, without_credentials

WITHHELD = (*SECRET_OPTIONS, "metrics_url")
"""Options never sent: the secret ones (the API key, the headers) and the server-metrics URLs (read by the master
only, they may hold credentials)."""
NAMES_KEY = "llm_locust_secret_names"
"""The entry of the options on the wire holding the master's `SecretNames.to_wire()` (a worker's options get it)."""


@dataclass(frozen=True)
class SecretNames:
    """Which secrets a process sends with its requests, by name only: the API key's variable ("" without a key), the
    `--header` names, and the `--host` URLs (without their credentials) that carry credentials."""

    api_key_env: str = ""
    headers: tuple[str, ...] = ()
    credential_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, endpoint: EndpointSettings, host: str | None) -> SecretNames:
        """The names of the secrets of `endpoint` (the key, the headers) and of Locust's `host`."""
        return cls(
            endpoint.api_key_env if endpoint.api_key else "",
            tuple(name for name, _ in endpoint.header),
            tuple(without_credentials(url) for url in split_hosts(host) if _has_credentials(url)),
        )

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-able dict (names only)."""
        return {
            "api_key_env": self.api_key_env,
            "headers": list(self.headers),
            "credential_urls": list(self.credential_urls),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SecretNames:
        """From `to_wire`'s dict."""
        return cls(data["api_key_env"], tuple(data["headers"]), tuple(data["credential_urls"]))


def wire_host(host: str | None) -> str | None:
    """Locust's `host` as it crosses the wire: each URL without its credentials."""
    if not host or not any(_has_credentials(url) for url in split_hosts(host)):
        return host
    return ",".join(without_credentials(url) if _has_credentials(url) else url for url in split_hosts(host))


def wire_options(options: dict[str, Any], names: SecretNames) -> dict[str, Any]:
    """The master's `options` (`vars` of Locust's parsed options, left as they are) as they cross the wire: a copy
    without `WITHHELD` — so a worker keeps its own values of them — the host without credentials, and with the
    secrets' `names`."""
    sent = {name: value for name, value in options.items() if name not in WITHHELD}
    if "host" in sent:
        sent["host"] = wire_host(sent["host"])
    sent[NAMES_KEY] = names.to_wire()
    return sent


def with_credentials(host: str | None, own_host: str | None) -> str | None:
    """The master's `host` (credentials left out on the wire) with each URL's credentials taken from the same URL of
    the worker's `own_host` (its own --host), where it has them."""
    own = {without_credentials(url): url for url in split_hosts(own_host) if _has_credentials(url)}
    if not host or not own:
        return host
    return ",".join(own.get(without_credentials(url), url) for url in split_hosts(host))


def missing_secrets(master: SecretNames, own: SecretNames) -> str | None:
    """Why a worker whose secrets are `own` cannot send the master's requests (one line naming what to set), or None.

    A worker refuses when the master sends a key and it has none, when their `--header` names differ (case aside), or
    when the master's --host has credentials for a URL that the worker's own --host has not."""
    problems = []
    if master.api_key_env and not own.api_key_env:
        problems.append(
            f"the master sends an API key and this worker has none: set {master.api_key_env} in the worker's "
            "environment (or give it --api-key)"
        )
    if sorted(n.lower() for n in master.headers) != sorted(n.lower() for n in own.headers):
        problems.append(
            f"the master sends the headers {_names(master.headers)} and this worker {_names(own.headers)}: give each "
            "worker the same --header options"
        )
    lacking = [url for url in master.credential_urls if url not in own.credential_urls]
    if lacking:
        problems.append(
            f"the master's --host has credentials for {', '.join(lacking)} and this worker's own --host has none: "
            "give the worker the same --host"
        )
    if not problems:
        return None
    return "; ".join(problems) + " (secrets never cross the master port)"


@dataclass(frozen=True)
class Target:
    """Where a process's requests go and which credentials they carry, as its options name them: its `--host` URLs
    without credentials (None: no --host), `--provider`, and the key's variable `--api-key-env` ("": the provider's
    default)."""

    hosts: tuple[str, ...] | None
    provider: str
    api_key_env: str
    allowed: tuple[str, ...] = ()

    @classmethod
    def of(cls, options: Any, host: str | None) -> Target:
        """The target of Locust's parsed `options` and `host` (Locust's --host, as the process uses it), with the
        servers its --allow-host names besides (`allowed`)."""
        hosts = tuple(without_credentials(url) for url in split_hosts(host)) if host else None
        allowed = tuple(url for value in getattr(options, "allow_host", None) or () for url in split_hosts(value))
        provider = getattr(options, "provider", DEFAULT_PROVIDER)
        return cls(hosts, provider, getattr(options, "api_key_env", "") or "", allowed)


def foreign_target(master: Target, own: Target) -> str | None:
    """Why a worker whose own options name `own` refuses its master's test aimed at `master` (one line naming each
    option that differs), or None. Only what the worker names counts: a --host (the master's URLs must be on its
    servers or on those of its --allow-host: scheme, host name and port, as the web UI's form is held to), a
    --provider other than the default, an --api-key-env; what it leaves out follows the master."""
    problems = []
    if own.hosts is not None and not _within(master.hosts, (*own.hosts, *own.allowed)):
        nor = " nor of its --allow-host" if own.allowed else ""
        problems.append(
            f"the master's --host {_urls(master.hosts)} is not on a server of this worker's own --host "
            f"{_urls(own.hosts)}{nor}"
        )
    if own.provider != DEFAULT_PROVIDER and master.provider != own.provider:
        problems.append(f"the master's --provider {master.provider} is not this worker's own {own.provider}")
    if own.api_key_env and master.api_key_env != own.api_key_env:
        theirs = master.api_key_env or "(none: the provider's default)"
        problems.append(f"the master's --api-key-env {theirs} is not this worker's own {own.api_key_env}")
    if not problems:
        return None
    return "; ".join(problems) + " (a worker sends only where its own options say: start it with the master's or none)"


def _within(hosts: tuple[str, ...] | None, servers: tuple[str, ...]) -> bool:
    """True when each URL of `hosts` is on a server (scheme, host name, port) of one of the URLs `servers`."""
    return hosts is not None and host_refusal(",".join(hosts), servers) is None


def _urls(hosts: tuple[str, ...] | None) -> str:
    return ",".join(hosts) if hosts else "(none)"


def _has_credentials(url: str) -> bool:
    return "@" in urlsplit(url).netloc


def _names(headers: tuple[str, ...]) -> str:
    return ", ".join(headers) if headers else "none"
