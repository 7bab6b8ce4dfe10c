"""Which servers the web UI's form may send to: the servers of --host and --allow-host, compared by scheme, host
name and port — credentials and path play no part."""

from __future__ import annotations

import pytest

from llm_locust.errors import ConfigError
from llm_locust.transport.replicas import allowed_hosts, host_refusal, server_of, shown_url

ALLOWED = ("http://10.0.0.1:8000", "https://api.example.com/v1", "http://u:secret@[::1]:9000")


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("http://10.0.0.1:8000/v1", ("http", "10.0.0.1", 8000)),
        ("HTTPS://API.Example.com", ("https", "api.example.com", 443)),
        ("http://h", ("http", "h", 80)),
        ("http://[REDACTED]:[REDACTED]@127.0.0.1:5000", ("http", "127.0.0.1", 5000)),  # the form's host as shown
        ("http://[::1]:9000/x?y#z", ("http", "::1", 9000)),
        ("ftp://h", None),
        ("h:80", None),
        ("http://", None),
        ("http://u:p@", None),
        ("http://h:99999", None),
        ("http://h:port", None),
    ],
)
def test_server_of(url, server):
    assert server_of(url) == server


def test_hosts_on_an_allowed_server_pass():
    for host in ("", "http://10.0.0.1:8000", "http://10.0.0.1:8000/other/path", "https://api.example.com",
                 "https://someone:else@api.example.com:443/v1", "http://10.0.0.1:8000, https://api.example.com",
                 "http://[REDACTED]@[::1]:9000"):  # fmt: skip
        assert host_refusal(host, ALLOWED) is None, host


@pytest.mark.parametrize(
    ("host", "named"),
    [
        ("http://10.0.0.1:8001", "http://10.0.0.1:8001"),  # another port
        ("https://10.0.0.1:8000", "https://10.0.0.1:8000"),  # another scheme
        ("http://api.example.com", "http://api.example.com"),
        ("http://10.0.0.1:8000,http://evil:1", "http://evil:1"),  # one of several
        ("http://user:pw@evil:1/p", "http://evil:1/p"),  # named without its credentials
        ("user:pw@evil:1", "evil:1"),
        ("ftp://10.0.0.1:8000", "ftp://10.0.0.1:8000"),
    ],
)
def test_a_host_on_another_server_is_refused_in_one_line_naming_it(host, named):
    message = host_refusal(host, ALLOWED)
    assert message is not None and message.startswith(f"host {named!r} refused") and "\n" not in message
    assert "pw" not in message and "nothing was sent" in message


def test_nothing_allowed_refuses_every_host():
    assert host_refusal("http://127.0.0.1:8000", ()) is not None
    assert host_refusal("", ()) is None


def test_allow_host_values_are_split_and_checked():
    assert allowed_hosts(["http://a:1,http://b:2", "https://c"]) == ("http://a:1", "http://b:2", "https://c")
    assert allowed_hosts([]) == ()
    with pytest.raises(ConfigError, match=r"^--allow-host 'a:1' names no http\(s\) server"):
        allowed_hosts(["http://ok:1", "u:secret@a:1"])


def test_shown_url_leaves_credentials_out():
    assert shown_url("http://u:p@h:1/x") == "http://h:1/x"
    assert shown_url("https://[REDACTED]@h") == "https://h"
    assert shown_url("u:p@h") == "h"
    assert shown_url("http://h/a@b") == "http://h/a@b"  # an @ in the path is no credential
