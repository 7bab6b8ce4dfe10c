"""What the web UI's start form may set, where the UI listens by default (and that the operator's own --web-host,
LOCUST_WEB_HOST or config file still wins), and the one line on how to expose it."""

from __future__ import annotations

import pytest
from conftest import options

from llm_locust.config.web_access import exposure_line, form_refusal, is_loopback

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
