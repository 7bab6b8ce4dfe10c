"""The secrets registry, unit by unit: what the settings register, how URL credentials and messages
cut short are handled, every escaped form of a secret, and what the web UI form's empty secret fields mean."""

from __future__ import annotations

import base64
import html
import json
import secrets
from urllib.parse import quote, quote_plus

from conftest import options
from harness.output import secret_forms
from jinja2.utils import htmlsafe_json_dumps

from llm_locust import redact
from llm_locust.config.settings import Settings, keep_secrets, secret_options
from llm_locust.metrics.protocol import error_text


def token() -> str:
    return secrets.token_hex(10)


def test_settings_register_every_secret_of_the_options(monkeypatch):
    key, azure_key, gateway, user, password, metrics_password = (token() for _ in range(6))
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", azure_key)
    Settings.from_options(
        options("--host", f"http://{user}:{password}@127.0.0.1:9", "--api-key", key, "--header", f"X-Gw: {gateway}",
                "--metrics-url", f"http://m:{metrics_password}@127.0.0.1:9/metrics")
    )  # fmt: skip
    Settings.from_options(options("--provider", "azure", "--deployment", "d"))  # the provider's variable
    text = f"{key} {azure_key} Bearer {gateway} {user}:{password} {metrics_password}"
    assert redact.redact(text) == "[REDACTED] [REDACTED] Bearer [REDACTED] [REDACTED]:[REDACTED] [REDACTED]"


def test_both_of_google_s_key_variables_are_registered(monkeypatch):
    """--provider gemini: GOOGLE_API_KEY (the one sent) and GEMINI_API_KEY (set too, not sent) are both hidden."""
    google, gemini = token(), token()
    monkeypatch.setenv("GOOGLE_API_KEY", google)
    monkeypatch.setenv("GEMINI_API_KEY", gemini)
    point = Settings.from_options(options("--host", "http://127.0.0.1:9", "--provider", "gemini", "--model", "m"))
    assert point.endpoint.api_key == google
    assert redact.redact(f"{google} {gemini}") == "[REDACTED] [REDACTED]"


def test_url_credentials_are_registered_as_written_decoded_and_as_basic_auth():
    user, password = f"u{token()}", f"p%40{token()}"
    redact.register_url(f"https://{user}:{password}@example.com/v1")
    basic = base64.b64encode(f"{user}:{password.replace('%40', '@')}".encode()).decode()
    for value in (user, password, password.replace("%40", "@"), basic):
        assert redact.redact(f"<{value}>") == "<[REDACTED]>"


def test_a_secret_inside_a_longer_one_leaves_nothing_of_either():
    short = token()
    long = f"{short}{token()}"
    redact.register(short)
    redact.register(long)
    assert redact.redact(f"a {long} b {short}") == "a [REDACTED] b [REDACTED]"


def test_server_text_is_redacted_before_it_is_cut():
    secret = token() * 3  # 60 characters, straddling the 200-character cut
    redact.register(secret)
    message = error_text({"message": "x" * 180 + secret})
    assert len(message) <= 203 and secret[:12] not in message and "[REDACTED]" in message


def test_empty_secret_fields_of_the_web_ui_form_keep_the_start_up_values():
    opts = options("--api-key", "k" * 8, "--header", "A: 1", "--header", "B: 2")
    given = secret_options(opts)
    opts.api_key, opts.header = "", [""]  # what Locust's /swarm makes of the form's empty fields
    keep_secrets(opts, given)
    assert opts.api_key == "k" * 8 and Settings.from_options(opts).endpoint.header == (("A", "1"), ("B", "2"))
    opts.header = ["C: 3"]  # typed in the form: used
    keep_secrets(opts, given)
    assert Settings.from_options(opts).endpoint.header == (("C", "3"),)


def test_a_secret_quoted_escaped_in_html_or_json_is_redacted_too():
    secret = f'{token()}&<"é'
    redact.register(secret)
    for quoted in (secret, html.escape(secret), json.dumps(secret)[1:-1]):
        assert redact.redact(f"<p>{quoted}</p>") == "<p>[REDACTED]</p>"


def test_every_escaped_form_of_a_secret_is_redacted():
    """The forms a scan looks for (JSON, HTML, percent-encoding, repr, twice escaped, either hex case; written by
    the libraries that write them) are each redacted whole."""
    secret = f"{token()}'&<>\"% /{token()}é"
    redact.register(secret)
    forms = secret_forms(secret)
    assert len(forms) > 50 and "\\u0027\\u0026\\u003c\\u003e" in " ".join(forms)
    for form in forms:
        assert redact.redact(f"<{form}>") == "<[REDACTED]>", form


def test_url_credentials_in_a_locust_page_are_redacted():
    """`--host "http://alice:Sec'ret&Pw@..."` as Locust's pages embed it (Jinja's tojson: `Sec\\u0027ret\\u0026Pw`)."""
    user, password = f"alice{token()[:6]}", f"Sec'ret&Pw{token()[:6]}"
    redact.register_url(f"http://{user}:{password}@127.0.0.1:8000")
    page = f"<script>window.templateArgs = {htmlsafe_json_dumps({'host': f'http://{user}:{password}@127.0.0.1:8000'})}"
    assert "\\u0027ret\\u0026Pw" in page
    assert (
        redact.redact(page) == '<script>window.templateArgs = {"host": "http://[REDACTED]:[REDACTED]@127.0.0.1:8000"}'
    )


def test_percent_encoded_url_credentials_are_redacted_in_either_case_and_decoded():
    password = f"{token()}'&<>\"% {token()}"  # written in the URL with what RFC 3986 does not allow there encoded
    written = quote(password, safe="!$&'()*+,;=")
    redact.register_url(f"https://u{token()}:{written}@example.com/v1")
    for form in (written, written.lower(), password, quote(password, safe=""), quote_plus(password, safe="")):
        assert redact.redact(f"({form})") == "([REDACTED])", form


def test_a_secret_of_letters_and_digits_has_one_form():
    secret = token()
    assert redact.escaped_forms(secret) == (secret,)


def test_a_call_header_value_is_redacted_and_only_the_newest_are_kept(monkeypatch):
    """A scenario's per-call `headers=` values (`register_call_value`): redacted like --header values; beyond
    `MAX_CALL_VALUES` the oldest is forgotten, never a value the settings registered."""
    monkeypatch.setattr(redact, "MAX_CALL_VALUES", 2)
    settings_value, first, second, third = (token() for _ in range(4))
    redact.register(settings_value)
    redact.register_call_value(settings_value)  # also sent in a call: still the settings' own
    redact.register_call_value(first)
    assert redact.redact(f"echo {first}") == "echo [REDACTED]"
    assert redact.redact(json.dumps({"x-call": f"{first}'"})) == json.dumps({"x-call": "[REDACTED]'"})
    redact.register_call_value(second)
    redact.register_call_value(third)  # the third call value: the first is forgotten
    assert redact.redact(f"{first} {second} {third}") == f"{first} [REDACTED] [REDACTED]"
    assert redact.redact(settings_value) == "[REDACTED]"
    for _ in range(3):
        redact.register_call_value(token())
    assert redact.redact(settings_value) == "[REDACTED]"
