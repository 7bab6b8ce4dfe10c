"""Several replicas of one deployment behind one `--host URL1,URL2,...`: the list, its checks, the pick.

Locust's `--host` is one string (the command line, a config file, the web UI's form); llm-locust reads it as a
comma-separated list of base URLs. With one URL nothing changes. With several, each user's FastHttp session keeps
the first replica as its base URL (GET /v1/models goes there) and every completion request goes to the absolute
URL of the replica picked for it; the session's client pool keeps one connection pool per replica. Credentials in a
replica's URL (`http://user:token@host`) become that request's Basic auth: they are never part of the URL sent,
of a label or of a message.

Each process picks on its own: round-robin (each process starts at its own replica, so that several workers do not
all send their first request to the first one), or least-in-flight (the replica with the fewest of this process's
requests in flight; ties go round-robin). Each request to one of several replicas also counts in the breakdown
("replica", label), the label being the replica's URL without credentials.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from llm_locust.errors import ConfigError

BALANCES = ("round-robin", "least-in-flight")
DIMENSION = "replica"
"""The breakdown dimension of the per-replica metrics in summary.json (`breakdowns.replica`)."""
_EXAMPLE = "e.g. --host http://127.0.0.1:8000 or --host http://10.0.0.1:8000,http://10.0.0.2:8000"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def split_hosts(host: str | None) -> list[str]:
    """The base URLs of a `--host` value (comma-separated, blanks around them dropped); [] when empty."""
    return [part.strip() for part in host.split(",")] if host else []


def without_api_root(host: str) -> str:
    """`host` (Locust's --host, comma-separated base URLs) with a trailing `/v1` cut from each URL: the OpenAI SDK's
    `base_url` ends there, while llm-locust's API paths (`/v1/chat/completions`, ...) include it. Other URLs are
    left as they are: the result equals `host` when none ends in `/v1`."""

    def cut(url: str) -> str:
        trimmed = url.strip().rstrip("/")
        return trimmed.removesuffix("/v1") if trimmed.endswith("/v1") else url

    return ",".join(cut(url) for url in host.split(","))


def host_problem(url: str) -> str | None:
    """Why `url` cannot be a base URL (one line, credentials left out), or None when it can."""
    scheme, sep, rest = url.partition("://")
    if not url:
        return "--host lists an empty URL (two commas in a row, or one at an end)"
    shown = without_credentials(url) if sep else url.rpartition("@")[2]
    if not sep:
        return f"--host {shown!r} has no URL scheme: start it with http:// or https://, {_EXAMPLE}"
    if scheme.lower() not in ("http", "https"):
        return f"--host {shown!r}: unknown URL scheme {scheme!r}; use http:// or https://, {_EXAMPLE}"
    if not rest.split("/", 1)[0].rpartition("@")[2]:
        return f"--host {shown!r} names no server address, {_EXAMPLE}"
    try:
        urlsplit(url).port  # noqa: B018 (raises on a port that is not a number or out of range)
    except ValueError:
        return f"--host {shown!r} has a port that is not a number in 1..65535, {_EXAMPLE}"
    return None


def check_hosts(host: str | None) -> None:
    """Raise ConfigError with one line per bad URL of `host` (Locust's --host); empty is fine (given later)."""
    problems = [problem for url in split_hosts(host) if (problem := host_problem(url)) is not None]
    if problems:
        raise ConfigError("\n".join(problems))


def server_of(url: str) -> tuple[str, str, int] | None:
    """The server a base URL sends to: (scheme, host name, port), lower case, the scheme's default port filled in;
    None when `url` names no http(s) server. Credentials and path play no part (a URL shown with its credentials as
    `[REDACTED]` names the same server)."""
    scheme, sep, rest = url.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        return None
    address = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    try:
        parts = urlsplit(f"//{address}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return scheme, parts.hostname, port or _DEFAULT_PORTS[scheme]


def allowed_hosts(values: Iterable[str]) -> tuple[str, ...]:
    """The URLs of --allow-host `values` (each repeatable and comma-separated); ConfigError naming the first that names
    no http(s) server."""
    urls = tuple(url for value in values for url in split_hosts(value))
    for url in urls:
        if server_of(url) is None:
            raise ConfigError(
                f"--allow-host {shown_url(url)!r} names no http(s) server: give its base URL, e.g. --allow-host "
                "http://10.0.0.5:8000"
            )
    return urls


def host_refusal(host: str, allowed: Iterable[str]) -> str | None:
    """Why requests may not go to `host` (a --host value as typed in the web UI's form, comma-separated URLs), in one
    line naming the first URL whose server — scheme, host name and port — is not the server of one of the `allowed`
    URLs (credentials left out); None when every URL's is, or `host` is empty (the users' own host)."""
    servers = {server for url in allowed for server in [server_of(url)] if server is not None}
    for url in split_hosts(host):
        if server_of(url) not in servers:
            return (
                f"host {shown_url(url)!r} refused: the web UI sends only to the servers of --host and --allow-host "
                "given when llm-locust started; nothing was sent"
            )
    return None


def shown_url(url: str) -> str:
    """`url` as typed, without its user-info part (also when it is no valid URL)."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep:
        return scheme.rpartition("@")[2]
    authority, *tail = re.split(r"(?=[/?#])", rest, maxsplit=1)
    return f"{scheme}://{authority.rpartition('@')[2]}{''.join(tail)}"


def without_credentials(url: str) -> str:
    """`url` without its user-info part and without a trailing slash."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)).rstrip("/")


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica: its base URL without credentials (`url`, also its label), the Basic auth those credentials make
    (None without), and the breakdown groups its requests count in (none when it is the only replica)."""

    url: str
    auth: tuple[str, str] | None = field(default=None, repr=False)
    groups: tuple[tuple[str, str], ...] = ()


def replica(url: str, several: bool) -> Replica:
    """The `Replica` of one base URL of --host (`several`: one of several, so it gets a breakdown)."""
    parts = urlsplit(url)
    auth = None
    if parts.username is not None or parts.password is not None:
        auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    shown = without_credentials(url)
    return Replica(shown, auth, ((DIMENSION, shown),) if several else ())


class ReplicaSet:
    """The replicas of one --host value and this process's pick (see the module docstring)."""

    def __init__(self, host: str, balance: str = "round-robin", start: int = 0) -> None:
        urls = split_hosts(host) or [""]  # no host: Locust's own check stops the user
        if balance not in BALANCES:
            raise ConfigError(f"--balance must be one of {', '.join(BALANCES)}, got {balance!r}")
        self.replicas = tuple(replica(url, len(urls) > 1) for url in urls)
        self.least_in_flight = balance == "least-in-flight"
        self._next = start % len(self.replicas)
        self.in_flight = [0] * len(self.replicas)

    @property
    def several(self) -> bool:
        """True when there is more than one replica."""
        return len(self.replicas) > 1

    @property
    def first(self) -> Replica:
        """The first replica of the list (the users' base URL)."""
        return self.replicas[0]

    def _pick_index(self) -> int:
        count = len(self.replicas)
        start = self._next
        index = start
        if self.least_in_flight:
            in_flight = self.in_flight
            index = min(range(start, start + count), key=lambda i: in_flight[i % count]) % count
        self._next = (index + 1) % count
        return index

    @contextlib.contextmanager
    def use(self) -> Iterator[Replica | None]:
        """Pick the replica of the next request and count it in flight until the block ends; None when there is
        only one (the users' base URL)."""
        if not self.several:
            yield None
            return
        index = self._pick_index()
        self.in_flight[index] += 1
        try:
            yield self.replicas[index]
        finally:
            self.in_flight[index] -= 1
