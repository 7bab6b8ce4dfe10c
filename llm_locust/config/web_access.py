"""What Locust's web UI may be asked, and where it listens: the start form's fields (`form_refusal`), the UI's
default address (`WEB_UI_HOST`) and the line that says how to expose it safely (`exposure_line`). Pure; applied by
`runtime.web_guard`."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

WEB_UI_HOST = "127.0.0.1"
"""Where Locust's web UI listens unless `--web-host` (or LOCUST_WEB_HOST, or `web-host` in a config file) says
otherwise: loopback, as the UI has no login (Locust's own default is every interface)."""
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
