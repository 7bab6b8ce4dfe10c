r"""Keep secrets (API keys, header values, URL credentials) out of every text llm-locust writes or logs.

One registry per process. `settings.register_secrets` is the one place that fills it, from the options every process
builds its settings from: the API key (flag, config file or environment variable, whatever the provider), the AWS secret
key and session token (environment; those of an AWS profile are added by `transport.sigv4.check_credentials` as it reads
them), each `--header` value, and the user-info of every URL (--host, --metrics-url). A scenario's per-call `headers=`
values are registered as each call is sent (`register_call_value`, by `runtime.llm_client`), the newest
`MAX_CALL_VALUES` of them kept. `redact(text)` replaces each
registered value in `text` with `REDACTED` — also in every escaped form an output may write it in (`escaped_forms`:
JSON, HTML, percent-encoding, Python's repr, and one of those escaped again), as a server's error body or page may quote
it, and as Locust's pages embed values (JSON made HTML-safe, `'` as `\u0027`).

Where secrets could enter an output, they are redacted once, at the entry: failure messages when
a request record is failed (a server may echo a header in its error body) — so Locust's error
statistics, its failures CSV, summary.json and the console only ever see the redacted text —,
exception texts on the runner that collects them (`runtime.runner_ops`), every log record reaching the root
logger's handlers (`install_log_filter`, tracebacks included), and every page and JSON answer of
the web UI, on its final text, after every escape (`webui`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import html.entities
import json
import logging
import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote, urlsplit

REDACTED = "[REDACTED]"
_MIN_SECRET_CHARS = 4  # shorter values would redact ordinary words
_secrets: set[str] = set()
"""This process's secrets. A process-wide registry on purpose: log records, exception texts and web pages are
redacted by code (logging filters, Locust's runner) that cannot be handed a settings object."""
_call_values: dict[str, None] = {}
"""The secrets registered as one call's header values (`register_call_value`), oldest first."""
MAX_CALL_VALUES = 1024
"""Per-call header values kept registered: a scenario sending a new token with every call must not slow every
redaction without limit (each secret costs one search per text); a server echoes a call's header in that call's own
answer, redacted as the request fails, long before 1024 other values were sent."""
_forms: dict[str, tuple[str, tuple[str, ...]]] = {}
"""Each registered secret's (anchor, forms), computed once."""
_entries: list[tuple[str, tuple[str, ...]]] = []
"""(anchor, forms) per secret, longest secret first (a secret containing another one is replaced whole): `forms` are
its `escaped_forms`, `anchor` a part of it that every form keeps (its longest run of ASCII letters and digits, which
no escape changes), looked for first — a text without it holds no form, so a text holding no secret costs one
search per secret, as before escaped forms were known."""

_HEX_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|&#[xX][0-9a-fA-F]+;")
r"""An escape written in hexadecimal, either case (`%2f` `%2F`, `\u003c` `\u003C`, `&#x3c;` `&#X3C;`)."""
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
_MIN_ANCHOR_CHARS = 4  # shorter runs would be found in most texts: then every form is looked for
_JSON_U = re.compile(r"\\u([0-9a-f]{4})")
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_HTML_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "'": "\\u0027"})
_HTML_QUOTE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})
_HTML_NOQUOTE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_HTML_MARKUPSAFE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})
_HTML_XML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"})


def _json(text: str) -> str:
    r"""JSON's string escape (json.dumps, ASCII only): `\"`, `\\`, control and non-ASCII characters as `\uXXXX`."""
    return json.dumps(text)[1:-1]


def _json_html_safe(text: str) -> str:
    r"""JSON made safe inside HTML, as Flask's and Jinja's `tojson` (Locust's pages) and Go write it: also `<` `>`
    `&` `'` as `\u003c` ..."""
    return _json(text).translate(_HTML_SAFE)


def _json_every_char(text: str) -> str:
    r"""JSON with every character other than an ASCII letter or digit as `\uXXXX` (surrogate pairs above U+FFFF)."""
    return "".join(c if c.isascii() and c.isalnum() else json.dumps(c, ensure_ascii=True)[1:-1] if ord(c) > 0xFFFF
                   else f"\\u{ord(c):04x}" for c in text)  # fmt: skip


def _upper_json_hex(text: str) -> str:
    return _JSON_U.sub(lambda m: "\\u" + m[1].upper(), text)


def _lower_percent_hex(text: str) -> str:
    return _PERCENT.sub(lambda m: m[0].lower(), text)


def _entity_name(char: str) -> str | None:
    """The HTML named entity of `char` (`&amp;`, `&apos;`, `&eacute;`), if it has one."""
    name = html.entities.codepoint2name.get(ord(char)) or ("apos" if char == "'" else None)
    return f"&{name};" if name else None


def _html_every_char(style: str) -> Callable[[str], str]:
    """HTML with every character other than an ASCII letter or digit as a character reference: named where HTML
    has a name (`style` "named", else decimal), decimal (`&#39;`), or hexadecimal (`&#x27;`, `&#x3C;`)."""
    formats = {"decimal": "&#{:d};", "hex": "&#x{:x};", "HEX": "&#x{:X};", "named": "&#{:d};"}
    template = formats[style]

    def encode(text: str) -> str:
        return "".join(
            c if c.isascii() and c.isalnum() else (style == "named" and _entity_name(c)) or template.format(ord(c))
            for c in text
        )

    return encode


def _translated(table: dict[int, str]) -> Callable[[str], str]:
    return lambda text: text.translate(table)


_PERCENT_ENCODERS: tuple[Callable[[str], str], ...] = (
    lambda text: quote(text, safe=""),  # percent-encoding of the UTF-8 bytes, upper-case hexadecimal
    lambda text: quote_plus(text, safe=""),  # forms: a space as `+`
    lambda text: quote(text, safe="!$&'()*+,;="),  # the user-info of a URL (RFC 3986 sub-delims kept)
    lambda text: quote(text, safe="!'()*"),  # JavaScript's encodeURIComponent
)
_ENCODERS: tuple[Callable[[str], str], ...] = (
    lambda text: text,
    _json,
    lambda text: json.dumps(text, ensure_ascii=False)[1:-1],  # orjson, JSON with UTF-8
    _json_html_safe,
    _json_every_char,
    lambda text: _upper_json_hex(_json_html_safe(text)),
    lambda text: _upper_json_hex(_json_every_char(text)),
    lambda text: _json(text).replace("/", "\\/"),  # `\/`, as PHP and some others write `/`
    lambda text: _json_html_safe(text).replace("/", "\\/"),
    lambda text: repr(text)[1:-1],  # Python's repr (a %r in a log line)
    lambda text: text.replace("\\", "\\\\").replace("'", "\\'"),  # repr in single quotes, JavaScript
    _translated(_HTML_QUOTE),  # html.escape
    _translated(_HTML_NOQUOTE),  # html.escape(quote=False), text outside attributes
    _translated(_HTML_MARKUPSAFE),  # Jinja's and markupsafe's escape
    _translated(_HTML_XML),  # XML
    _html_every_char("named"),
    _html_every_char("decimal"),
    _html_every_char("hex"),
    _html_every_char("HEX"),
    *_PERCENT_ENCODERS,
    *(lambda text, encode=encode: _lower_percent_hex(encode(text)) for encode in _PERCENT_ENCODERS),
)
r"""Every way an output may write a text: as is, JSON (ASCII, UTF-8, HTML-safe, every character escaped, `\/`,
upper-case hexadecimal), Python's repr, HTML (html.escape, markupsafe, XML, every character as a named, decimal or
hexadecimal reference), percent-encoding (upper and lower case, `%20` and `+` for a space, a URL's user-info,
encodeURIComponent)."""


@functools.cache
def escaped_forms(secret: str) -> tuple[str, ...]:
    """Every form in which an output may write `secret`, longest first: as is, escaped by each of `_ENCODERS`, and
    escaped by one of them and then by another (a JSON answer quoting an HTML page, a page embedding JSON, a URL
    holding either). A secret of ASCII letters and digits only has one form: itself."""
    first = {encode(secret) for encode in _ENCODERS}
    forms = {outer(form) for form in first for outer in _ENCODERS}
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def _anchor(secret: str) -> str:
    """The longest run of ASCII letters and digits of `secret` (every escaped form keeps it), or "" when it is
    shorter than `_MIN_ANCHOR_CHARS`."""
    run = max(_ALNUM_RUN.findall(secret), key=len, default="")
    return run if len(run) >= _MIN_ANCHOR_CHARS else ""


def register(secret: str | None) -> None:
    """Remember `secret` so that `redact` hides it, also in each of its `escaped_forms` (values shorter than 4
    characters are ignored)."""
    if secret is not None:
        _call_values.pop(secret, None)  # a value of the run's own settings is never forgotten
    _add(secret)


def register_call_value(secret: str | None) -> None:
    """Remember `secret`, a value of one call's headers, like `register`; forget the oldest such value beyond
    `MAX_CALL_VALUES` (a value also registered by `register` stays)."""
    if not secret or len(secret) < _MIN_SECRET_CHARS or secret in _secrets:
        return
    _call_values[secret] = None
    _add(secret)
    if len(_call_values) > MAX_CALL_VALUES:
        oldest = next(iter(_call_values))
        del _call_values[oldest]
        _secrets.discard(oldest)
        _forms.pop(oldest, None)
        _sort_entries()


def _add(secret: str | None) -> None:
    """`secret` registered (values shorter than 4 characters ignored) and the entries sorted again."""
    if not secret or len(secret) < _MIN_SECRET_CHARS or secret in _secrets:
        return
    _secrets.add(secret)
    _forms[secret] = (_anchor(secret), tuple(dict.fromkeys(map(_fold_hex, escaped_forms(secret)))))
    _sort_entries()


def _sort_entries() -> None:
    _entries[:] = [_forms[known] for known in sorted(_secrets, key=len, reverse=True)]


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
    """`text` with every registered secret, in any of its escaped forms, replaced by `REDACTED` (hexadecimal escapes
    matched in either case)."""
    folded = ""
    for anchor, forms in _entries:
        if anchor in text:
            folded = folded or _fold_hex(text)
            for form in forms:
                if form in folded:
                    text, folded = _replaced(text, folded, form)
    return text


def _fold_hex(text: str) -> str:
    """`text` with every hexadecimal escape in upper case: same length, each character where it was."""
    return _HEX_ESCAPE.sub(lambda m: m[0].upper(), text)


def _replaced(text: str, folded: str, form: str) -> tuple[str, str]:
    """`text` and its `folded` copy with `REDACTED` in place of each occurrence of `form` in `folded`."""
    starts, start = [], folded.find(form)
    while start >= 0:
        starts.append(start)
        start = folded.find(form, start + len(form))
    bounds = list(zip([0, *(start + len(form) for start in starts)], [*starts, len(text)], strict=True))
    return REDACTED.join(text[a:b] for a, b in bounds), REDACTED.join(folded[a:b] for a, b in bounds)


def has_secrets() -> bool:
    """True once a secret is registered (until then `redact` returns its text unchanged)."""
    return bool(_entries)


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
