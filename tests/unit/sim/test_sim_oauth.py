"""The simulator's token endpoints and verifier (`sim.oauth.TokenService`) on parsed requests: what each flow
accepts and refuses, the discovery document, the lifetime and the counts; and the clouds' paths (routed to the APIs
that declare them)."""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import urlencode

import pytest

from llm_locust.sim import http
from llm_locust.sim.apis import BY_NAME, route
from llm_locust.sim.apis.wire import ApiError
from llm_locust.sim.oauth import ENTRA_SCOPE, TokenService


def request(method: str, target: str, body: dict | None = None, **headers: str) -> http.Request:
    parsed = http.Request(method, target, "HTTP/1.1", {"host": "127.0.0.1:9", **headers})
    parsed.body = urlencode(body or {}).encode()
    return parsed


def service(lifetime_s: float = 60.0) -> TokenService:
    return TokenService(lifetime_s, client=("id", "sec"), require_token=True, scheme="https")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_databricks_client_credentials() -> None:
    tokens = service()
    grant = {"grant_type": "client_credentials", "scope": "all-apis"}
    status, body = tokens.answer(request("POST", "/oidc/v1/token", grant, authorization=basic("id", "sec")))
    assert status == 200 and json.loads(body)["token_type"] == "Bearer" and json.loads(body)["expires_in"] == 60
    assert tokens.answer(request("POST", "/oidc/v1/token", grant, authorization=basic("id", "bad")))[0] == 401
    assert tokens.counts()["issued"]["databricks"] == 1 and tokens.counts()["token_refused"] == 1


def test_entra_discovery_and_token() -> None:
    tokens = service()
    assert tokens.serves("GET", "/t1/v2.0/.well-known/openid-configuration")
    status, body = tokens.answer(request("GET", "/t1/v2.0/.well-known/openid-configuration"))
    assert status == 200 and json.loads(body)["token_endpoint"] == "https://127.0.0.1:9/t1/oauth2/v2.0/token"
    grant = {"grant_type": "client_credentials", "client_id": "id", "client_secret": "sec", "scope": ENTRA_SCOPE}
    assert tokens.answer(request("POST", "/t1/oauth2/v2.0/token", grant))[0] == 200
    assert tokens.answer(request("POST", "/t1/oauth2/v2.0/token", {**grant, "scope": "other"}))[0] == 400
    assert tokens.answer(request("POST", "/t1/oauth2/v2.0/token", {**grant, "client_secret": "x"}))[0] == 401
    assert tokens.counts()["issued"]["entra"] == 1


def test_google_refuses_what_is_not_a_signed_assertion() -> None:
    tokens = service()
    grant = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": "a.b"}
    status, body = tokens.answer(request("POST", "/token", grant))
    assert status == 400 and json.loads(body)["error"] == "invalid_grant"  # no service account known


def test_the_verifier_refuses_missing_unknown_and_expired_tokens() -> None:
    tokens = service(lifetime_s=0.05)
    grant = {"grant_type": "client_credentials"}
    token = json.loads(tokens.answer(request("POST", "/oidc/v1/token", grant, authorization=basic("id", "sec")))[1])
    tokens.check(request("POST", "/v1/chat/completions", authorization=f"Bearer {token['access_token']}"))
    for headers in ({}, {"authorization": "Bearer unknown"}):
        with pytest.raises(ApiError) as refused:
            tokens.check(request("POST", "/v1/chat/completions", **headers))
        assert refused.value.status == 401
    time.sleep(0.06)
    with pytest.raises(ApiError, match="expired"):
        tokens.check(request("POST", "/v1/chat/completions", authorization=f"Bearer {token['access_token']}"))
    assert tokens.counts()["verified"] == 1 and tokens.counts()["refused"] == 3
    tokens.reset()
    assert tokens.counts() == {"issued": {"databricks": 0, "entra": 0, "google": 0}, "token_refused": 0,
                               "verified": 0, "refused": 0}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/openai/deployments/gpt4o/chat/completions", "chat"),
        ("/openai/deployments/gpt4o/completions", "completions"),
        ("/openai/deployments/gpt4o/embeddings", "embeddings"),
        ("/serving-endpoints/llama/invocations", "chat"),
        ("/v1/projects/p/locations/us-central1/endpoints/openapi/chat/completions", "chat"),
        ("/v1beta1/projects/p/locations/global/endpoints/openapi/chat/completions", "chat"),
        ("/v1/chat/completions", "chat"),
        ("/serving-endpoints/a/b/invocations", None),
        ("/openai/deployments/gpt4o/images/generations", "images"),
        ("/openai/deployments/gpt4o/audio/speech", None),
    ],
)
def test_cloud_paths(path, api) -> None:
    assert route(path, "api-version=2024-10-21") == (BY_NAME[api] if api else None, None)
