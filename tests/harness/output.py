"""What a run printed and wrote, scanned: its error lines, and any piece of a secret in any escaped form."""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path
from urllib.parse import quote, quote_plus
from xml.sax.saxutils import escape as xml_escape

import markupsafe
import orjson
from jinja2.utils import htmlsafe_json_dumps


def error_lines(output: str) -> list[str]:
    """The lines of Locust's console `output` logged at ERROR level."""
    return [line for line in output.splitlines() if "/ERROR/" in line]


FRAGMENT_CHARS = 12
"""A piece of a secret this long counts as a leak (a message cut short must not keep half a key)."""


def _upper_hex(text: str) -> str:
    """`\\u00e9` → `\\u00E9` and `%c3` → `%C3`: the other case of every hexadecimal escape."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: "\\u" + m[1].swapcase(), text)
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m[0].swapcase(), text)


def _references(text: str, template: str) -> str:
    """Every character other than an ASCII letter or digit as an HTML character reference (`template`)."""
    return "".join(c if c.isascii() and c.isalnum() else template.format(ord(c)) for c in text)


ESCAPES = {
    "json": lambda s: json.dumps(s)[1:-1],
    "json (UTF-8)": lambda s: orjson.dumps(s).decode()[1:-1],
    "json for HTML (Flask/Jinja tojson)": lambda s: str(htmlsafe_json_dumps(s))[1:-1],
    "json with \\/": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "python repr": lambda s: repr(s)[1:-1],
    "html.escape": html.escape,
    "html.escape(quote=False)": lambda s: html.escape(s, quote=False),
    "markupsafe": lambda s: str(markupsafe.escape(s)),
    "xml": lambda s: xml_escape(s, {'"': "&quot;", "'": "&apos;"}),
    "html decimal references": lambda s: _references(s, "&#{:d};"),
    "html hexadecimal references": lambda s: _references(s, "&#x{:x};"),
    "percent-encoding": lambda s: quote(s, safe=""),
    "percent-encoding, + for a space": lambda s: quote_plus(s, safe=""),
    "percent-encoding of a URL's user-info": lambda s: quote(s, safe="!$&'()*+,;="),
}
"""How the outputs a scan reads may write a text, each as the library that writes it does."""


@functools.cache
def secret_forms(secret: str) -> list[str]:
    """`secret` as it is and as every escape of `ESCAPES` writes it, alone and twice in a row (a JSON answer
    quoting an HTML page, a page embedding JSON), with upper- and lower-case hexadecimal escapes: what a scan
    for `secret` must look for. Independent of `llm_locust.redact` (the code a scan checks)."""
    once = {escape(secret) for escape in ESCAPES.values()} | {secret}
    twice = {outer(form) for form in once for outer in ESCAPES.values()}
    forms = once | twice
    return sorted(forms | {_upper_hex(form) for form in forms})


def leaks(text: str, secrets: tuple[str, ...]) -> list[str]:
    """The secrets of which `text` holds a piece of `FRAGMENT_CHARS` characters (or all of a shorter one), as it is
    or in any of its `secret_forms`."""
    return [secret for secret in secrets if any(_holds(text, piece) for piece in _pieces(secret))]


@functools.cache
def _pieces(secret: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each piece of `FRAGMENT_CHARS` characters of `secret` (all of a shorter one): its longest run of ASCII
    letters and digits if 4 or more (no escape changes them: a text without it holds no form of the piece, a quick
    first look), and its forms."""
    n = min(FRAGMENT_CHARS, len(secret))
    pieces = {secret[i : i + n] for i in range(len(secret) - n + 1)}
    runs = {piece: max(re.findall(r"[A-Za-z0-9]+", piece), key=len, default="") for piece in pieces}
    return tuple((runs[piece] if len(runs[piece]) >= 4 else "", tuple(secret_forms(piece))) for piece in pieces)


def _holds(text: str, piece: tuple[str, tuple[str, ...]]) -> bool:
    run, forms = piece
    return run in text and any(form in text for form in forms)


def assert_no_secret(results: Path, output: str, *secrets: str) -> int:
    """No secret (nor a piece of one, in any escaped form) in any file of `results` (CSV, JSON, HTML, log) or in
    the console output; returns the number of files scanned."""
    files = [p for p in results.rglob("*") if p.is_file()]
    assert {"summary.json", "report.html", "locust_stats.csv", "llm_timeseries.csv"} <= {p.name for p in files}
    for path in files:
        assert not leaks(path.read_text(errors="replace"), secrets), path
    assert not leaks(output, secrets)
    return len(files)
