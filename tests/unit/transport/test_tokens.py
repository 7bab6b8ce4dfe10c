"""The pure decisions of short-lived bearer tokens (`transport.tokens`): which flow a run uses, when a token is
refreshed, what a failed refresh means; the header a token makes; the secrets of the credentials."""

from __future__ import annotations

import json

import pytest

from llm_locust.errors import ConfigError
from llm_locust.transport.tokens import (
    RETRY_MAX_S,
    BearerAuth,
    Token,
    after_failure,
    credential_secrets,
    refresh_after_s,
    token_flow,
)


@pytest.mark.parametrize(
    ("provider", "auth", "has_key", "environ", "flow"),
    [
        ("azure", "auto", True, {"AZURE_CLIENT_ID": "c"}, ""),  # a key wins in auto
        ("azure", "auto", False, {"AZURE_CLIENT_ID": "c"}, "entra"),
        ("azure", "auto", False, {}, ""),  # no credentials: as before, no auth
        ("azure", "oauth", True, {}, "entra"),  # asked for: even with a key
        ("azure", "key", False, {"AZURE_CLIENT_ID": "c"}, ""),
        ("databricks", "auto", False, {"DATABRICKS_CLIENT_ID": "c"}, "databricks-m2m"),
        ("databricks", "auto", True, {"DATABRICKS_CLIENT_ID": "c"}, ""),
        ("databricks", "auto", False, {}, ""),
        ("vertex", "auto", False, {}, "google"),  # application-default credentials: always looked for
        ("vertex", "auto", True, {}, ""),  # a static token given (GOOGLE_OAUTH_ACCESS_TOKEN)
        ("openai", "auto", False, {"AZURE_CLIENT_ID": "c"}, ""),
    ],
)
def test_token_flow(provider, auth, has_key, environ, flow) -> None:
    assert token_flow(provider, auth, has_key, environ) == flow


def test_oauth_on_a_provider_without_a_flow_is_refused() -> None:
    with pytest.raises(ConfigError, match="--auth oauth: --provider openai has no OAuth flow"):
        token_flow("openai", "oauth", False, {})


@pytest.mark.parametrize(
    ("lifetime_s", "after_s"),
    [
        (3600.0, 2880.0),  # an hour: at 80 % (48 min), earlier than 5 min before expiry (55 min)
        (1000.0, 700.0),  # 5 min before expiry is earlier than 80 %
        (400.0, 200.0),  # 5 min before expiry would be at 100 s: never before half the lifetime
        (3.0, 1.5),  # the tests' tokens
        (0.0, 0.1),  # issued already expired (a skewed clock): not asked for again at once, in a loop
        (-5.0, 0.1),
    ],
)
def test_refresh_after(lifetime_s, after_s) -> None:
    assert refresh_after_s(lifetime_s) == pytest.approx(after_s)


def test_a_failed_refresh_keeps_the_token_and_retries_before_it_expires() -> None:
    assert after_failure(remaining_s=600.0, failures=1) == (1.0, False)
    assert after_failure(remaining_s=600.0, failures=3) == (4.0, False)  # doubling
    assert after_failure(remaining_s=600.0, failures=20) == (RETRY_MAX_S, False)  # up to a cap
    assert after_failure(remaining_s=1.0, failures=5) == (0.5, False)  # several attempts before it expires
    retry_s, expired = after_failure(remaining_s=-2.0, failures=4)
    assert expired and retry_s == 8.0  # expired: requests go with it and fail; attempts go on, backing off


def test_bearer_auth_sends_the_current_token() -> None:
    auth = BearerAuth("t1")
    assert auth.headers("POST", "https://h/v1/x", b"{}") == {"Authorization": "Bearer t1"}
    auth.token = "t2"
    assert auth.headers("POST", "https://h/v1/x", b"") == {"Authorization": "Bearer t2"}
    assert "secret" not in repr(Token("secret-value", 3.0))


def test_credential_secrets(tmp_path) -> None:
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nshort\n-----END PRIVATE KEY-----\n"
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({"private_key": pem}))
    environ = {"AZURE_CLIENT_SECRET": "az-s", "DATABRICKS_CLIENT_SECRET": "db-s", "GOOGLE_APPLICATION_CREDENTIALS":
               str(key_file), "AZURE_CLIENT_ID": "not a secret"}  # fmt: skip
    assert credential_secrets(environ) == ["az-s", "db-s", pem, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"]
    assert credential_secrets({"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "missing.json")}) == []
