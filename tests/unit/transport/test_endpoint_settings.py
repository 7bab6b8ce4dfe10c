"""The API key's resolution (`transport.endpoint_settings.EndpointSettings`): a variable named by --api-key-env must
hold it."""

from __future__ import annotations

import os
import re

import pytest
from conftest import options

from llm_locust.errors import ConfigError
from llm_locust.transport.endpoint_settings import EndpointSettings, api_key_from_env


def endpoint(*args: str) -> EndpointSettings:
    return EndpointSettings.from_options(options("--host", "http://127.0.0.1:1", *args))


def test_a_variable_named_by_api_key_env_that_is_unset_or_empty_is_named(monkeypatch):
    monkeypatch.delenv("LLM_LOCUST_NO_SUCH_VAR", raising=False)
    unset = "--api-key-env LLM_LOCUST_NO_SUCH_VAR: the variable is not set in this process's environment"
    with pytest.raises(ConfigError, match=re.escape(unset)):
        endpoint("--api-key-env", "LLM_LOCUST_NO_SUCH_VAR")
    monkeypatch.setenv("LLM_LOCUST_NO_SUCH_VAR", "")
    with pytest.raises(ConfigError, match=re.escape("LLM_LOCUST_NO_SUCH_VAR: the variable is empty")):
        endpoint("--api-key-env", "LLM_LOCUST_NO_SUCH_VAR")
    monkeypatch.setenv("LLM_LOCUST_NO_SUCH_VAR", "sk-unit-1")
    assert endpoint("--api-key-env", "LLM_LOCUST_NO_SUCH_VAR").api_key == "sk-unit-1"


def test_the_providers_default_variable_may_be_unset_and_api_key_wins(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert endpoint().api_key == ""  # a local server wants no key: the default variable is optional
    assert api_key_from_env("OPENAI_API_KEY", named=False) == ""
    monkeypatch.delenv("LLM_LOCUST_NO_SUCH_VAR", raising=False)
    assert endpoint("--api-key", "sk-flag", "--api-key-env", "LLM_LOCUST_NO_SUCH_VAR").api_key == "sk-flag"


def test_bedrock_settings_checked_before_load(monkeypatch, tmp_path):
    """--provider bedrock: a --model and the fast client; a Bedrock API key (bearer, nothing signed) or SigV4 with the
    process's credentials and a region; a master, which sends nothing, needs no credentials."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    host = ("--host", "https://bedrock-runtime.eu-central-1.amazonaws.com", "--provider", "bedrock")

    def bedrock(*args: str, master: bool = False) -> EndpointSettings:
        parsed = options(*host, *args)
        parsed.master = master
        return EndpointSettings.from_options(parsed)

    with pytest.raises(ConfigError, match=r"--provider bedrock needs --model MODEL_ID"):
        bedrock()
    with pytest.raises(ConfigError, match="--provider bedrock needs --client fast"):
        bedrock("--model", "m", "--client", "openai-sdk")
    with pytest.raises(ConfigError, match="no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        bedrock("--model", "m")
    master = bedrock("--model", "m", master=True)
    assert (master.aws_region, master.signs) == ("eu-central-1", True)
    parsed = options("--provider", "bedrock", "--model", "m")  # a worker, before its master's --host arrives
    parsed.worker = True
    with pytest.raises(ConfigError, match="no AWS credentials found"):  # checked at once: its own
        EndpointSettings.from_options(parsed)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    signed = bedrock("--model", "m", "--aws-region", "us-east-2")
    assert (signed.aws_region, signed.signs, signed.server_family) == ("us-east-2", True, "openai")
    assert EndpointSettings.from_options(parsed).aws_region == ""  # the region: when the master's options come
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSK-unit-key")
    keyed = bedrock("--model", "m")
    assert (keyed.api_key, keyed.aws_region, keyed.signs) == ("ABSK-unit-key", "", False)
