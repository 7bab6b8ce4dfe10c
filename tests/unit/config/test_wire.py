"""What crosses the master–worker wire (config/wire.py): every option but the secrets, the secrets by name only; a
worker puts its own URL credentials back and names what it lacks."""

from __future__ import annotations

import json
import secrets

import msgpack
import pytest
from conftest import options

from llm_locust import redact
from llm_locust.config.settings import Settings
from llm_locust.config.wire import (
    NAMES_KEY,
    SecretNames,
    Target,
    foreign_target,
    missing_secrets,
    wire_host,
    wire_options,
    with_credentials,
)
from llm_locust.errors import ConfigError


def names_of(*args: str) -> SecretNames:
    opts = options(*args)
    return SecretNames.of(Settings.from_options(opts).endpoint, opts.host)


def test_the_options_on_the_wire_hold_no_secret_and_name_every_one(monkeypatch):
    key, gateway, password, metrics_password = (secrets.token_hex(10) for _ in range(4))
    monkeypatch.setenv("LLM_WIRE_KEY", key)
    opts = options(
        "--host", f"http://u:{password}@127.0.0.1:9,http://127.0.0.1:10", "--api-key-env", "LLM_WIRE_KEY",
        "--header", f"X-Gw: {gateway}", "--header", "X-Team: t1", "--model", "m",
        "--metrics-url", f"http://m:{metrics_password}@127.0.0.1:9/metrics",
    )  # fmt: skip
    names = SecretNames.of(Settings.from_options(opts).endpoint, opts.host)
    assert names == SecretNames("LLM_WIRE_KEY", ("X-Gw", "X-Team"), ("http://127.0.0.1:9",))
    sent = wire_options(vars(opts), names)
    packed = msgpack.packb(sent, use_bin_type=True)  # as Locust sends it
    for secret in (key, gateway, password, metrics_password, "t1"):
        assert secret.encode() not in packed and secret not in json.dumps(sent)
    assert "api_key" not in sent and "header" not in sent and "metrics_url" not in sent  # the worker keeps its own
    assert sent["host"] == "http://127.0.0.1:9,http://127.0.0.1:10" and sent["model"] == "m"
    assert sent["api_key_env"] == "LLM_WIRE_KEY"  # a name, not a secret
    assert SecretNames.from_wire(msgpack.unpackb(packed)[NAMES_KEY]) == names
    assert vars(opts)["header"] == [f"X-Gw: {gateway}", "X-Team: t1"]  # the master's own options are left as they are


def test_a_host_without_credentials_crosses_as_it_is():
    assert wire_host("http://a:1, http://b:2/") == "http://a:1, http://b:2/"
    assert wire_host("http://u:p@a:1/,http://b:2") == "http://a:1,http://b:2"
    assert wire_host(None) is None and wire_host("") == ""


def test_a_worker_takes_the_credentials_of_the_same_url_from_its_own_host():
    assert with_credentials("http://a:1,http://b:2", "http://u:p@a:1/, http://v:q@c:3") == "http://u:p@a:1/,http://b:2"
    assert with_credentials("http://a:1", "http://a:1") == "http://a:1"
    assert with_credentials("http://a:1", None) == "http://a:1"


def test_a_worker_lacking_a_secret_of_the_master_names_it(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    master = SecretNames("OPENAI_API_KEY", ("X-Gw", "X-Team"), ("http://127.0.0.1:9",))
    same = names_of(
        "--api-key", "k" * 8, "--header", "x-team: 1", "--header", "X-GW: 2", "--host", "http://u:p@127.0.0.1:9"
    )
    assert missing_secrets(master, same) is None  # header names compare case aside
    bare = names_of()
    assert bare == SecretNames()
    assert missing_secrets(master, bare) == (
        "the master sends an API key and this worker has none: set OPENAI_API_KEY in the worker's environment (or "
        "give it --api-key); the master sends the headers X-Gw, X-Team and this worker none: give each worker the same "
        "--header options; the master's --host has credentials for http://127.0.0.1:9 and this worker's own --host "
        "has none: give the worker the same --host (secrets never cross the master port)"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "a-worker-key")  # the provider's default variable, in the worker's environment
    assert names_of().api_key_env == "OPENAI_API_KEY"
    assert missing_secrets(SecretNames("OPENAI_API_KEY"), names_of()) is None
    assert missing_secrets(SecretNames(), names_of()) is None  # a key the master has not: nothing lacks


def test_header_lines_of_the_environment_are_headers_and_secrets(monkeypatch):
    value = secrets.token_hex(10)
    monkeypatch.setenv("LLM_LOCUST_HEADERS", f"X-Org: {value}\n\nX-Tier: gold\n")
    endpoint = Settings.from_options(options("--header", "X-Team: t")).endpoint
    assert endpoint.header == (("X-Team", "t"), ("X-Org", value), ("X-Tier", "gold"))
    assert redact.redact(f"<{value}>") == "<[REDACTED]>"
    monkeypatch.setenv("LLM_LOCUST_HEADERS", "no colon here")
    with pytest.raises(ConfigError) as e:
        Settings.from_options(options())
    assert str(e.value) == (
        "LLM_LOCUST_HEADERS: one per line, expected 'Name: value' with a name without spaces (the value is not shown)"
    )


def target(*args: str) -> Target:
    opts = options(*args)
    return Target.of(opts, opts.host)


def test_what_a_worker_names_itself_must_be_the_masters():
    master = target("--host", "http://a:1,http://b:2/", "--provider", "azure", "--api-key-env", "K")
    assert foreign_target(master, target()) is None  # a worker naming nothing follows its master
    assert foreign_target(master, target("--host", "http://u:p@a:1/,http://b:2", "--api-key-env", "K")) is None
    why = foreign_target(master, target("--host", "http://c:3", "--provider", "openai", "--api-key-env", "MINE"))
    assert why is not None and "\n" not in why
    assert "the master's --host http://a:1,http://b:2 is not on a server of this worker's own --host http://c:3" in why
    assert "the master's --provider azure is not this worker's own openai" in why
    assert "the master's --api-key-env K is not this worker's own MINE" in why
    why = foreign_target(target("--host", "http://a:1"), target("--host", "http://a:1", "--api-key-env", "MINE"))
    assert why is not None and "--api-key-env (none: the provider's default) is not this worker's own MINE" in why
    assert "p@" not in (foreign_target(target("--host", "http://u:p@a:1"), target("--host", "http://c:3")) or "")
    assert foreign_target(master, target("--host", "http://c:3", "--allow-host", "http://a:1/v1,http://b:2")) is None
    why = foreign_target(target("--host", "http://d:4"), target("--host", "http://c:3", "--allow-host", "http://a:1"))
    assert why is not None and "own --host http://c:3 nor of its --allow-host" in why
