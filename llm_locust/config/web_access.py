"""What Locust's web UI may be asked, by whom, and where it listens: the start form's fields (`form_refusal`), the
user-class edit's (`user_edit_refusal`), the pages that may change its state (`cross_origin_refusal`, the origins of
`--web-origin`: `web_origins`), the UI's default address (`WEB_UI_HOST`) and the line that says how to expose it
safely (`exposure_line`). Pure; applied by `runtime.web_guard`."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Collection, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from llm_locust.errors import ConfigError
from llm_locust.option_values import option

WEB_UI_HOST = "127.0.0.1"
"""Where Locust's web UI listens unless `--web-host` (or LOCUST_WEB_HOST, or `web-host` in a config file) says
otherwise: loopback, as the UI has no login (Locust's own default is every interface)."""


@dataclasses.dataclass(frozen=True)
class WebUIOptions:
    """The web UI's own option, declared here (`config.options` registers it); `runtime.plugin` reads it through
    `web_origins`."""

    web_origin: tuple[str, ...] = dataclasses.field(
        metadata=option(
            "An origin the web UI is opened at besides its own address, e.g. a reverse proxy's "
            "https://locust.example.com (repeatable): its pages may start and stop tests; other origins' pages may "
            "not",
            None,
            repeat=True,
            startup_only=True,
        )
    )


LOCUST_FORM_FIELDS = frozenset(
    {"user_count", "spawn_rate", "host", "run_time", "profile", "user_classes", "shape_class"}
)
"""The fields of Locust's own start form (its /swarm handles each itself); the form's other fields are the options
Locust shows in it (`include_in_web_ui`: every llm-locust option but the `startup_only` ones, `options`)."""


def form_refusal(posted: Iterable[str], options: Iterable[str], shown: Iterable[str]) -> str | None:
    """Why a POST /swarm carrying the fields `posted` is refused, in one line naming the first field that is one of
    the `options` (the names of the parsed options) but neither a field of Locust's own form (`LOCUST_FORM_FIELDS`)
    nor one of the options the form `shown`s — a `startup_only` option, or one of Locust's own; None when every field
    may come from the form (fields that name no option are Locust's to ignore)."""
    settable = LOCUST_FORM_FIELDS | set(shown)
    names = set(options)
    for field in posted:
        if field in names and field not in settable:
            return (
                f"{field}: set only when llm-locust starts (command line, config file or environment), not from the "
                "web UI's form; nothing was started"
            )
    return None


USER_FIELDS = frozenset({"user_class_name", "tasks", "weight", "fixed_count"})
"""What POST /user (Locust's edit of a user class) may set: the class it names, its tasks, weight and fixed count —
nothing that decides where its requests go or what they carry (`proxy_host`, `proxy_port`, `host`, headers, auth,
timeouts, TLS, ...: Locust would `setattr` any attribute). `host` is taken only unchanged: Locust's page posts it."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: a page of any origin may send them (it cannot read the answer: no CORS)."""
BROWSER_SITES = frozenset({"same-origin", "none"})
"""The `Sec-Fetch-Site` values of a request the UI's own page (or the operator typing a URL) made."""
DEFAULT_PORTS = {"http": 80, "https": 443}


def user_edit_refusal(posted: Any, current_host: str | None) -> str | None:
    """Why a POST /user whose JSON body is `posted` is refused, in one line naming the first field outside
    `USER_FIELDS` (or a `host` other than the class's `current_host`); None when it may be applied."""
    if not isinstance(posted, Mapping):
        return "POST /user: the body must be a JSON object naming user_class_name; nothing was changed"
    for field in posted:
        unchanged = field == "host" and (posted[field] or None) == (current_host or None)
        if field not in USER_FIELDS and not unchanged:
            return (
                f"{field}: the web UI may change only a user class's tasks, weight and fixed_count, not where its "
                "requests go nor what they carry (set it in the locustfile or on the command line); nothing was changed"
            )
    return None


def origin_of(url: str | None) -> str | None:
    """The origin (`scheme://host[:port]`, lower case, the scheme's default port left out) of `url`, or of a
    `Host` header's value prefixed with its scheme; None when it has none (`null`, a relative or malformed URL)."""
    try:
        parts = urlsplit(url or "")
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + ("" if port in (None, DEFAULT_PORTS[parts.scheme]) else f":{port}")


def web_origins(values: Iterable[str]) -> tuple[str, ...]:
    """The origins `--web-origin` names (e.g. https://locust.example.com, a reverse proxy's), normalized
    (`origin_of`); ConfigError naming the first that is not an http(s) origin."""
    origins = []
    for value in values:
        origin = origin_of(value)
        if origin is None or urlsplit(value).path.strip("/") or urlsplit(value).query:
            raise ConfigError(
                f"--web-origin {value}: expected an origin, scheme://host[:port], e.g. https://locust.example.com"
            )
        origins.append(origin)
    return tuple(origins)


def cross_origin_refusal(
    own: str, fetch_site: str | None, origin: str | None, referer: str | None, trusted: Collection[str],
    names: Collection[str],
) -> str | None:  # fmt: skip
    """Why a state-changing request to the web UI is refused as coming from a page of another origin, in one line;
    None when it comes from the UI's own page, a page of a `trusted` origin (`--web-origin`), the operator's typing,
    or a client that is no browser.

    `own`: the UI's origin as the request reached it (its scheme and `Host` header); `fetch_site`, `origin`,
    `referer`: the request's `Sec-Fetch-Site`, `Origin` and `Referer` headers (None when absent); `names`: the host
    names that are this machine's (besides IP addresses and localhost). A browser sends `Origin` with every POST (and
    `Sec-Fetch-Site` to https and loopback servers); a client that sends none of the three (curl, a script) is no
    browser: no page of another origin can make it send. A browser's request is refused when it says another site
    (`Sec-Fetch-Site: cross-site` or `same-site`: another port of 127.0.0.1 is the same site), when its `Origin` (else
    its `Referer`) is another origin, `null` or malformed, or when the UI's own `Host` is a name not of this machine
    (a page of a name the attacker's DNS turned to this address: DNS rebinding)."""
    if fetch_site is None and origin is None and referer is None:
        return None
    own = origin_of(own) or own
    source = origin_of(origin) if origin is not None else origin_of(referer) if referer is not None else None
    said = f"from a page of {source}" if source else f"from a page of {origin or referer or 'another site'}"
    if source is not None and source in trusted:
        return None
    if fetch_site is not None and fetch_site not in BROWSER_SITES:
        problem = f"{said} (Sec-Fetch-Site: {fetch_site})"
    elif (origin is not None or referer is not None) and source != own:
        problem = said
    elif not _own_name(urlsplit(own).hostname or "", names):
        problem = f"to {own}, a name that is none of this machine's (DNS rebinding?)"
    else:
        return None
    return (
        f"cross-origin request refused: {problem}, not of this web UI ({own}); nothing was changed (open the UI "
        "itself, or name the origin it is served at with --web-origin)"
    )


def _own_name(host: str, names: Collection[str]) -> bool:
    """True when `host` (a `Host` header's name) is an IP address, localhost (or a name under .localhost) or one of
    this machine's `names`."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        pass
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost") or host in {n.lower() for n in names}


def exposure_line(host: str, port: int, login: bool) -> str:
    """One line: where the web UI listens (`host` as Locust binds it: "" is every interface; `port`), and how to
    expose it safely (`login`: --web-login is on)."""
    safely = "a reverse proxy with its own login, or --web-host 0.0.0.0 --web-login (docs/security.md)"
    if is_loopback(host):
        return (
            f"web UI on {host}:{port} only (this machine); to reach it from elsewhere use an SSH tunnel "
            f"(ssh -L {port}:127.0.0.1:{port} THIS_HOST), {safely}"
        )
    where = "every interface" if host in ("", "*", "0.0.0.0", "::") else host
    if login:
        return f"web UI on {where}, port {port}, behind --web-login"
    return (
        f"web UI on {where}, port {port}, without a login: whoever reaches it can start load with the run's key; "
        f"expose it through an SSH tunnel, {safely}"
    )


def is_loopback(host: str) -> bool:
    """True when `host` (an address or name a server binds) is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
