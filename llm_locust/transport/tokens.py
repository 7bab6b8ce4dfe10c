"""Short-lived bearer tokens: which flow a run uses (`token_flow`), when a token is refreshed (`refresh_after_s`) and
what a failed refresh means (`after_failure`) — pure —, the `BearerAuth` every user's requests carry (a
`auth.RequestAuth`), and the token sources of each cloud's own library (`token_source`), imported only when asked for.

Flows: `entra` (Azure OpenAI with Microsoft Entra ID: azure-identity's `DefaultAzureCredential`, scope
`ENTRA_SCOPE`), `databricks-m2m` (Databricks OAuth machine-to-machine: the client-credentials grant at the
workspace's `/oidc/v1/token`, plain OAuth over `requests`), `google` (Vertex AI: google-auth's application-default
credentials, scope `GOOGLE_SCOPE`). The refreshing greenlet is wiring in `runtime/token_keeper.py`.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from llm_locust.errors import ConfigError

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
AUTH_CHOICES = ("auto", "key", "oauth")
FLOWS = {"azure": "entra", "databricks": "databricks-m2m", "vertex": "google"}
"""The OAuth flow of each provider that has one (`--auth oauth`)."""
_AUTO_VARIABLE = {"azure": "AZURE_CLIENT_ID", "databricks": "DATABRICKS_CLIENT_ID"}
"""`--auth auto` without a key: the variable whose presence selects the provider's flow (Vertex AI: always)."""
REFRESH_SHARE = 0.8
"""A token is refreshed once this share of its lifetime has passed, ..."""
REFRESH_MARGIN_S = 300.0
"""... or this long before it expires, whichever is earlier, ..."""
MIN_SHARE = 0.5
"""... but never before half its lifetime (a token living less than 10 minutes), ..."""
MIN_REFRESH_S = 0.1
"""... nor sooner than this, seconds (a token issued already expired, by a skewed clock, is not asked for in a loop)."""
RETRY_MAX_S = 30.0
"""The longest pause between two attempts after a failed refresh, seconds."""


def token_flow(provider: str, auth: str, has_key: bool, environ: Mapping[str, str]) -> str:
    """The bearer-token flow a run uses ("" for none: a static key, or nothing) — `auth` is `--auth`, `has_key` says
    whether an API key is set; ConfigError when `--auth oauth` names a provider without a flow.

    `key`: none. `oauth`: the provider's flow (`FLOWS`). `auto`: none with a key; else Entra ID for azure when
    AZURE_CLIENT_ID is set, M2M for databricks when DATABRICKS_CLIENT_ID is set, Google's credentials for vertex."""
    if auth == "oauth":
        if provider not in FLOWS:
            raise ConfigError(f"--auth oauth: --provider {provider} has no OAuth flow here (azure, databricks, vertex)")
        return FLOWS[provider]
    if auth == "key" or has_key or provider not in FLOWS:
        return ""
    variable = _AUTO_VARIABLE.get(provider)
    return FLOWS[provider] if variable is None or environ.get(variable) else ""


def refresh_after_s(lifetime_s: float) -> float:
    """How long after it was issued a token living `lifetime_s` seconds is replaced, seconds: at `REFRESH_SHARE` of
    its lifetime or `REFRESH_MARGIN_S` before it expires, whichever is earlier, never before `MIN_SHARE` of it nor
    sooner than `MIN_REFRESH_S`."""
    return max(min(REFRESH_SHARE * lifetime_s, lifetime_s - REFRESH_MARGIN_S), MIN_SHARE * lifetime_s, MIN_REFRESH_S)


def after_failure(remaining_s: float, failures: int) -> tuple[float, bool]:
    """After `failures` (>= 1) failed refreshes in a row, the current token valid `remaining_s` more seconds (<= 0:
    expired): (seconds until the next attempt, whether requests now go with an expired token). The current token is
    kept while it is valid; attempts back off from 1 s, doubling up to `RETRY_MAX_S`, but are at most half the time
    left so that several come before the token expires."""
    backoff_s = min(2.0 ** (failures - 1), RETRY_MAX_S)
    if remaining_s <= 0:
        return backoff_s, True
    return max(min(backoff_s, remaining_s / 2), 0.05), False


@dataclass(frozen=True)
class Token:
    """A bearer token (`value`, a secret) and how long it lives from now, seconds."""

    value: str
    lifetime_s: float

    def __repr__(self) -> str:
        return f"Token(lifetime_s={self.lifetime_s:g})"


class BearerAuth:
    """The current token of a process as each request's `Authorization: Bearer` header (`auth.RequestAuth`);
    `token` is replaced by the refresher."""

    def __init__(self, token: str) -> None:
        self.token = token

    def headers(self, method: str, url: str, body: bytes) -> Mapping[str, str]:
        """`Authorization: Bearer <the current token>` (whatever the request)."""
        return {"Authorization": f"Bearer {self.token}"}


EXTRAS = {"entra": "azure", "google": "gcp"}
"""The pyproject extra that installs each flow's library."""


def token_source(flow: str, workspace: str, verify: bool | str) -> Callable[[], Token]:
    """The function that fetches a new token of `flow` from this process's own credentials (`workspace`: the Databricks
    workspace URL; `verify`: TLS trust for it, as `requests` takes it), its library imported and its credential object
    made now; ConfigError naming the `pip install` when the library is missing. The function raises ConfigError, one
    line naming the variable or file to fix, when the credentials are missing or refused."""
    if flow == "databricks-m2m":
        return partial(_databricks, workspace, verify)
    if flow == "entra":
        return _entra()
    return _google()


SECRET_VARIABLES = ("AZURE_CLIENT_SECRET", "DATABRICKS_CLIENT_SECRET")
"""The variables holding the flows' client secrets."""


def credential_secrets(environ: Mapping[str, str]) -> list[str]:
    """The secrets of the flows' credentials in `environ`, to keep out of every output: the client secrets, and the
    private key of the service-account key file GOOGLE_APPLICATION_CREDENTIALS names (whole, and each line of its
    PEM body: a printed piece stays hidden too); a key file that cannot be read holds none here."""
    found = [environ[name] for name in SECRET_VARIABLES if environ.get(name)]
    key_file = environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if key_file:
        try:
            private_key = json.loads(Path(key_file).read_text(encoding="utf-8")).get("private_key") or ""
        except (OSError, ValueError, AttributeError):
            private_key = ""
        if isinstance(private_key, str) and private_key:
            lines = [line.strip() for line in private_key.splitlines() if not line.startswith("-----")]
            found += [private_key, *(line for line in lines if len(line) >= 16)]
    return found


def _missing_library(flow: str, module: str) -> ConfigError:
    return ConfigError(f"{_FLOW_NAMES[flow]} needs {module}: pip install 'llm-locust[{EXTRAS[flow]}]'")


_FLOW_NAMES = {"entra": "--provider azure with Entra ID", "google": "--provider vertex (Google OAuth)",
               "databricks-m2m": "--provider databricks with OAuth M2M"}  # fmt: skip


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def _databricks(workspace: str, verify: bool | str) -> Token:
    """Databricks OAuth M2M: the service principal's DATABRICKS_CLIENT_ID / DATABRICKS_CLIENT_SECRET exchanged at
    `{workspace}/oidc/v1/token` (client credentials, scope all-apis)."""
    import requests

    client_id, secret = os.environ.get("DATABRICKS_CLIENT_ID", ""), os.environ.get("DATABRICKS_CLIENT_SECRET", "")
    if not client_id or not secret:
        raise ConfigError(
            "--provider databricks with OAuth M2M needs DATABRICKS_CLIENT_ID and DATABRICKS_CLIENT_SECRET"
        )
    url = workspace.rstrip("/") + "/oidc/v1/token"
    try:
        resp = requests.post(url, auth=(client_id, secret), data={"grant_type": "client_credentials",
                             "scope": "all-apis"}, timeout=30, verify=verify, allow_redirects=False)  # fmt: skip
    except requests.RequestException as e:
        raise ConfigError(f"Databricks OAuth M2M: could not reach {url} ({_first_line(e)})") from None
    if resp.status_code != 200 and resp.status_code not in (400, 401, 403):
        raise ConfigError(f"Databricks OAuth M2M: {url} answered HTTP {resp.status_code}")
    if resp.status_code != 200:
        raise ConfigError(
            f"Databricks OAuth M2M: {url} refused DATABRICKS_CLIENT_ID / DATABRICKS_CLIENT_SECRET (HTTP "
            f"{resp.status_code}): check the service principal's OAuth secret"
        )
    data = resp.json()
    return Token(data["access_token"], float(data.get("expires_in", 3600)))


def _entra() -> Callable[[], Token]:
    """Microsoft Entra ID: azure-identity's `DefaultAzureCredential` (AZURE_TENANT_ID / AZURE_CLIENT_ID /
    AZURE_CLIENT_SECRET and AZURE_AUTHORITY_HOST, workload identity, managed identity, the Azure CLI ...), scope
    `ENTRA_SCOPE`."""
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise _missing_library("entra", "azure-identity") from None
    credential = DefaultAzureCredential(disable_instance_discovery=True)

    def fetch() -> Token:
        try:
            access = credential.get_token(ENTRA_SCOPE)
        except Exception as e:  # azure.core's ClientAuthenticationError, CredentialUnavailableError
            raise ConfigError(
                "Entra ID: no token for AZURE_TENANT_ID / AZURE_CLIENT_ID / AZURE_CLIENT_SECRET (or this host's "
                f"identity): {_first_line(e)}"
            ) from None
        return Token(access.token, access.expires_on - time.time())

    return fetch


def _google() -> Callable[[], Token]:
    """Google: application-default credentials (GOOGLE_APPLICATION_CREDENTIALS' key file, gcloud's, workload
    identity, the metadata server), scope `GOOGLE_SCOPE`."""
    try:
        import google.auth
        import google.auth.transport.requests
    except ImportError:
        raise _missing_library("google", "google-auth") from None
    found: list[Any] = []

    def fetch() -> Token:
        try:
            if not found:
                found.append(google.auth.default(scopes=[GOOGLE_SCOPE])[0])
            credentials = found[0]
            credentials.refresh(google.auth.transport.requests.Request())
        except Exception as e:  # google.auth.exceptions.DefaultCredentialsError, RefreshError
            raise ConfigError(
                "Google OAuth: no token from GOOGLE_APPLICATION_CREDENTIALS (or gcloud's application-default "
                f"credentials): {_first_line(e)}"
            ) from None
        expiry: Any = credentials.expiry  # naive UTC
        lifetime_s = (expiry.replace(tzinfo=datetime.UTC) - datetime.datetime.now(datetime.UTC)).total_seconds()
        return Token(credentials.token, lifetime_s)

    return fetch
