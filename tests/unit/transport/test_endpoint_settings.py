"""The API key's resolution (`transport.settings.EndpointSettings`): a variable named by --api-key-env must hold it."""

from __future__ import annotations

import re

import pytest
from conftest import options

from llm_locust.errors import ConfigError
from llm_locust.transport.settings import EndpointSettings, api_key_from_env


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
