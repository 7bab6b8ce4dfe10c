"""Keep secrets (API keys, tokens, URL passwords) out of every text llm-locust writes or logs.

`register(secret)` remembers a value; `redact(text)` replaces every registered value in `text`
with `REDACTED`. Failure messages are redacted where they are made (a server may echo the key in
its error body), and `install_log_filter()` redacts every log record that reaches the root
logger's handlers (Locust's console and --logfile), tracebacks included.
"""

from __future__ import annotations

import contextlib
import logging
from urllib.parse import urlsplit

REDACTED = "[REDACTED]"
_MIN_SECRET_CHARS = 4  # shorter values would redact ordinary words
_secrets: set[str] = set()


def register(secret: str | None) -> None:
    """Remember `secret` so that `redact` hides it (values shorter than 4 characters are ignored)."""
    if secret and len(secret) >= _MIN_SECRET_CHARS:
        _secrets.add(secret)


def register_url(url: str | None) -> None:
    """Remember the password of a URL's user-info part (`https://user:token@host`), if any."""
    if url:
        with contextlib.suppress(ValueError):  # not a URL: nothing to hide
            register(urlsplit(url).password)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `REDACTED`."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


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
