"""Keep secrets (API keys, header values, URL credentials) out of every text llm-locust writes or logs.

One registry per process. `settings.register_secrets` is the one place that fills it, from the
options every process builds its settings from: the API key (flag, config file or environment
variable, whatever the provider), each `--header` value, and the user-info of every URL (--host,
--metrics-url). `redact(text)` replaces each registered value in `text` with `REDACTED` (also
HTML- or JSON-escaped, as an error page or body may quote it).

Where secrets could enter an output, they are redacted once, at the entry: failure messages when
a request record is failed (a server may echo a header in its error body) — so Locust's error
statistics, its failures CSV, summary.json and the console only ever see the redacted text —,
exception texts on the runner that collects them (`runtime.runner_ops`), every log record reaching the root
logger's handlers (`install_log_filter`, tracebacks included), and every page and JSON answer of
the web UI (`webui`).
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import logging
from urllib.parse import unquote, urlsplit

REDACTED = "[REDACTED]"
_MIN_SECRET_CHARS = 4  # shorter values would redact ordinary words
_secrets: set[str] = set()
"""This process's secrets. A process-wide registry on purpose: log records, exception texts and web pages are
redacted by code (logging filters, Locust's runner) that cannot be handed a settings object."""
_ordered: list[str] = []  # longest first: a secret containing another one is replaced whole


def register(secret: str | None) -> None:
    """Remember `secret` so that `redact` hides it, also as a server may quote it escaped in an
    HTML page or a JSON text (values shorter than 4 characters are ignored)."""
    if not secret or len(secret) < _MIN_SECRET_CHARS or secret in _secrets:
        return
    _secrets.update((secret, html.escape(secret), json.dumps(secret)[1:-1]))
    _ordered[:] = sorted(_secrets, key=len, reverse=True)


def register_url(url: str | None) -> None:
    """Remember the credentials in a URL's user-info part (`https://user:token@host`), if any: user
    name and password as written and decoded, and the `Authorization: Basic` value a client sends
    for them (Locust's HTTP clients turn URL credentials into that header)."""
    if not url:
        return
    with contextlib.suppress(ValueError):  # not a URL: nothing to hide
        parts = urlsplit(url)
        user, password = parts.username, parts.password
        for value in (user, password):
            if value:
                register(value)
                register(unquote(value))
        if user and password:
            userinfo = f"{unquote(user)}:{unquote(password)}".encode("latin-1", errors="replace")
            register(base64.b64encode(userinfo).decode("ascii"))


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `REDACTED`."""
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def has_secrets() -> bool:
    """True once a secret is registered (until then `redact` returns its text unchanged)."""
    return bool(_ordered)


class _RedactingFilter(logging.Filter):
    """Formats each record once, redacted, so handlers print no registered secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = _RedactingFilter()


def install_log_filter() -> None:
    """Redact every record reaching the root logger and its handlers (call once they are set up)."""
    root = logging.getLogger()
    for handler in root.handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
    if _FILTER not in root.filters:
        root.addFilter(_FILTER)
