"""What the web UI's start form may set, where the UI listens by default (and that the operator's own --web-host,
LOCUST_WEB_HOST or config file still wins), and the one line on how to expose it."""

from __future__ import annotations

import pytest
from conftest import options

from llm_locust.config.web_access import (
    cross_origin_refusal,
    exposure_line,
    form_refusal,
    is_loopback,
    origin_of,
    user_edit_refusal,
    web_origins,
)
from llm_locust.errors import ConfigError

OPTIONS = {"host", "user_count", "spawn_rate", "run_time", "max_tokens", "results_dir", "csv_prefix", "api_key"}
SHOWN = {"max_tokens", "api_key"}  # what the form shows: results_dir is start-up only, csv_prefix Locust's


def test_fields_of_the_form_pass_and_any_other_option_is_refused_naming_it():
    assert form_refusal(["user_count", "spawn_rate", "host", "max_tokens", "api_key"], OPTIONS, SHOWN) is None
    assert form_refusal(["user_count", "no_such_option"], OPTIONS, SHOWN) is None  # Locust ignores it
    for field in ("results_dir", "csv_prefix"):  # start-up only; Locust's own
        message = form_refusal(["user_count", "max_tokens", field], OPTIONS, SHOWN)
        assert message is not None and message.startswith(f"{field}: set only when llm-locust starts")
        assert "\n" not in message and "nothing was started" in message


def test_web_ui_binds_loopback_unless_the_operator_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCUST_WEB_HOST", raising=False)
    assert options().web_host == "127.0.0.1"
    assert options("--web-host", "*").web_host == "*"  # Locust's every interface
    assert options("--web-host", "0.0.0.0").web_host == "0.0.0.0"
    conf = tmp_path / "locust.conf"
    conf.write_text("web-host = 10.1.2.3\n")
    assert options("--config", str(conf)).web_host == "10.1.2.3"
    monkeypatch.setenv("LOCUST_WEB_HOST", "0.0.0.0")
    assert options().web_host == "0.0.0.0"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True), ("", False), ("*", False),
     ("0.0.0.0", False), ("192.0.2.7", False), ("my-host", False)],
)  # fmt: skip
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_exposure_line_says_where_and_how_to_expose_it_safely():
    local_line = exposure_line("127.0.0.1", 8089, login=False)
    assert local_line.startswith("web UI on 127.0.0.1:8089 only") and "ssh -L 8089:127.0.0.1:8089" in local_line
    assert "--web-host 0.0.0.0 --web-login" in local_line and "reverse proxy" in local_line
    open_line = exposure_line("", 8089, login=False)
    assert "every interface" in open_line and "without a login" in open_line and "--web-login" in open_line
    assert exposure_line("0.0.0.0", 9000, login=True) == "web UI on every interface, port 9000, behind --web-login"
    for line in (local_line, open_line):
        assert "\n" not in line


OWN = "http://127.0.0.1:8089"


@pytest.mark.parametrize(
    ("fetch_site", "origin", "referer"),
    [
        (None, None, None),  # curl, a script: no browser, no page behind it
        ("same-origin", OWN, f"{OWN}/"),  # Locust's own page (fetch)
        (None, OWN, None),  # a browser that sends no Sec-Fetch-* (plain http to a non-loopback address)
        (None, None, f"{OWN}/llm"),  # a GET link of the UI's own page: no Origin
        ("same-origin", None, None),  # no Referer (Referrer-Policy)
        ("none", None, None),  # the operator typed the URL or opened a bookmark
        ("cross-site", "https://locust.example.com", None),  # a reverse proxy named by --web-origin
        (None, "HTTP://127.0.0.1:8089", None),  # origins compare case-insensitively
    ],
)
def test_the_uis_own_pages_and_clients_that_are_no_browser_pass(fetch_site, origin, referer):
    assert cross_origin_refusal(OWN, fetch_site, origin, referer, ("https://locust.example.com",), ()) is None


@pytest.mark.parametrize(
    ("fetch_site", "origin", "referer", "said"),
    [
        (
            "same-site",
            "http://127.0.0.1:5555",
            None,
            "from a page of http://127.0.0.1:5555 (Sec-Fetch-Site: same-site)",
        ),
        (
            "cross-site",
            "https://evil.example",
            None,
            "from a page of https://evil.example (Sec-Fetch-Site: cross-site)",
        ),
        (None, "http://127.0.0.1:5555", None, "from a page of http://127.0.0.1:5555"),  # no Sec-Fetch-* sent
        (None, None, "http://127.0.0.1:5555/attack.html", "from a page of http://127.0.0.1:5555"),
        (None, "null", None, "from a page of null"),  # a sandboxed frame, a file:// or data: page
        ("cross-site", None, None, "from a page of another site (Sec-Fetch-Site: cross-site)"),
        (None, "http://127.0.0.1", None, "from a page of http://127.0.0.1"),  # another port
        (None, "https://127.0.0.1:8089", None, "from a page of https://127.0.0.1:8089"),  # another scheme
    ],
)
def test_a_page_of_another_origin_is_refused_in_one_line_naming_it(fetch_site, origin, referer, said):
    why = cross_origin_refusal(OWN, fetch_site, origin, referer, (), ())
    assert why == (
        f"cross-origin request refused: {said}, not of this web UI ({OWN}); nothing was changed (open the UI itself, "
        "or name the origin it is served at with --web-origin)"
    )


def test_a_name_that_is_not_this_machines_is_refused_to_a_browser_dns_rebinding():
    """A page of http://evil.example:8089 whose name the attacker's DNS turned to 127.0.0.1 is same-origin with
    itself: its Host is no name of this machine. Addresses, localhost and the machine's names pass."""
    rebound = "http://evil.example:8089"
    why = cross_origin_refusal(rebound, "same-origin", rebound, None, (), ("loadbox",))
    assert why is not None and "to http://evil.example:8089, a name that is none of this machine's" in why
    for own in ("http://localhost:8089", "http://LoadBox:8089", "http://10.0.0.5:8089", "http://[::1]:8089",
                "http://ui.localhost:8089"):  # fmt: skip
        assert cross_origin_refusal(own, "same-origin", own, None, (), ("loadbox",)) is None, own
    assert cross_origin_refusal(rebound, None, None, None, (), ()) is None  # curl to any name: no browser


def test_origins_are_normalized_and_web_origin_takes_origins_only():
    assert origin_of("HTTPS://Locust.Example.com:443/path?q") == "https://locust.example.com"
    assert origin_of("http://[::1]:80") == "http://[::1]"
    assert [origin_of(u) for u in ("null", "", "/relative", "ftp://x", "http://x:99999")] == [None] * 5
    assert web_origins(["https://locust.example.com/", "http://10.0.0.5:8089"]) == (
        "https://locust.example.com", "http://10.0.0.5:8089")  # fmt: skip
    for bad in ("locust.example.com", "https://locust.example.com/ui", "null"):
        with pytest.raises(ConfigError, match=f"^--web-origin {bad}: expected an origin"):
            web_origins([bad])


def test_a_user_class_edit_sets_only_its_tasks_weight_and_fixed_count():
    """Locust's page posts the class's json() (host, weight, fixed_count, tasks): passes with the host unchanged."""
    page = {"user_class_name": "ChatUser", "host": "", "weight": 2, "fixed_count": 0, "tasks": ["chat"]}
    assert user_edit_refusal(page, None) is None
    assert user_edit_refusal({**page, "host": "http://a:1"}, "http://a:1") is None
    for field, value in (("proxy_host", "127.0.0.1"), ("proxy_port", 9), ("host", "http://127.0.0.1:9"),
                         ("default_headers", {"X": "y"}), ("insecure", True), ("network_timeout", 1)):  # fmt: skip
        why = user_edit_refusal({**page, field: value}, None)
        assert why is not None and why.startswith(f"{field}: the web UI may change only a user class's tasks, weight")
        assert "\n" not in why
    assert user_edit_refusal(["ChatUser"], None) == (
        "POST /user: the body must be a JSON object naming user_class_name; nothing was changed"
    )
