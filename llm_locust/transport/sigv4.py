"""Amazon Bedrock's request auth: a SigV4 signature per request (`SigV4Signer`, a `auth.RequestAuth`), computed with
botocore (the optional extra `aws`: `pip install llm-locust[aws]`) from the AWS credential chain of this process.

The credentials are botocore's (`botocore.session.Session().get_credentials()`): the environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the shared credentials and config files (AWS_PROFILE, SSO, assume-role,
credential_process), a container's or an instance's role. Each process — master, every worker — reads its own; none
crosses the master–worker wire. Refreshable credentials (roles, SSO) are read again at every signature, so a soak
outlives their expiry. The region: `--aws-region`, else the one in a `bedrock-runtime.<region>.amazonaws.com` host,
else AWS_REGION, else botocore's (AWS_DEFAULT_REGION, the profile's `region`).

Checked before any load (`check_credentials`): botocore is installed, credentials are found, and they are well formed
(an access key id of 16 to 128 letters and digits, a secret key of 40 characters of base64, no whitespace in the
session token). Whether AWS accepts them — the key is active, the identity may call the model, the clock is right —
shows only when a request is answered (HTTP 403).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from llm_locust import redact
from llm_locust.errors import ConfigError

SERVICE = "bedrock"
"""The SigV4 service name of Bedrock's runtime (bedrock-runtime signs as `bedrock`)."""
INSTALL = "pip install 'llm-locust[aws]'"
CREDENTIALS_FIX = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE, "
    "or run with a role; or give a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK"
)
AWS_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
"""The environment variables holding AWS secrets (`config.settings.register_secrets` keeps them out of outputs)."""
NO_REGION = (
    "--provider bedrock: no AWS region: pass --aws-region REGION, a --host of https://bedrock-runtime.REGION.amazonaws.com"
    ", or set AWS_REGION"
)
_RUNTIME_HOST = re.compile(r"bedrock-runtime(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?")
_ACCESS_KEY = re.compile(r"[A-Z0-9]{16,128}")
_SECRET_KEY = re.compile(r"[A-Za-z0-9/+]{40}")


def _botocore() -> Any:
    """botocore's session module; ConfigError naming the extra to install when it is missing."""
    try:
        import botocore.session
    except ImportError:
        raise ConfigError(f"--provider bedrock signs requests with botocore: {INSTALL}") from None
    return botocore.session


def region(host: str, given: str) -> str:
    """The AWS region to sign for: `given` (`--aws-region`), else the region of a Bedrock runtime `host` URL, else
    AWS_REGION, else botocore's (AWS_DEFAULT_REGION, the profile's); ConfigError naming what to set."""
    if given:
        return given
    found = _RUNTIME_HOST.fullmatch(urlsplit(host).hostname or "") if host else None
    if found:
        return found[1]
    chained = os.environ.get("AWS_REGION") or _botocore().Session().get_config_variable("region")
    if not chained:
        raise ConfigError(NO_REGION)
    return str(chained)


def check_credentials() -> None:
    """ConfigError (one line naming what to set) unless this process finds well-formed AWS credentials; their secret
    key and session token are registered with `redact`."""
    credentials = _credentials()
    frozen = credentials.get_frozen_credentials()
    redact.register(frozen.secret_key)
    redact.register(frozen.token)
    if not _ACCESS_KEY.fullmatch(frozen.access_key or ""):
        raise ConfigError(
            f"--provider bedrock: the AWS access key id is malformed (16 to 128 capital letters and digits, no "
            f"spaces; source: {_method(credentials)}): {CREDENTIALS_FIX}"
        )
    if not _SECRET_KEY.fullmatch(frozen.secret_key or ""):
        raise ConfigError(
            f"--provider bedrock: the AWS secret access key is malformed (40 characters of A-Z a-z 0-9 / +, no spaces; "
            f"source: {_method(credentials)}; not shown): {CREDENTIALS_FIX}"
        )
    if frozen.token is not None and (not frozen.token or any(c.isspace() for c in frozen.token)):
        raise ConfigError(
            f"--provider bedrock: the AWS session token is empty or holds whitespace (source: {_method(credentials)}; "
            f"not shown): {CREDENTIALS_FIX}"
        )


def _credentials() -> Any:
    """botocore's credentials of this process (refreshable ones refresh themselves); ConfigError when there are none
    or the chain fails (a profile that does not exist, an SSO session expired)."""
    session = _botocore()
    try:
        credentials = session.Session().get_credentials()
    except Exception as e:  # botocore's ProfileNotFound, SSO token errors, a credential_process that fails
        raise ConfigError(f"--provider bedrock: the AWS credentials cannot be read ({redact.redact(str(e))})") from None
    if credentials is None:
        raise ConfigError(f"--provider bedrock: no AWS credentials found: {CREDENTIALS_FIX}")
    return credentials


def _method(credentials: Any) -> str:
    """Where `credentials` came from, as botocore names it ("env", "shared-credentials-file", ...)."""
    return str(getattr(credentials, "method", "") or "the credential chain")


class SigV4Signer:
    """`auth.RequestAuth` for Bedrock: the SigV4 headers (`Authorization`, `X-Amz-Date`, `X-Amz-Security-Token` with
    temporary credentials) of one request, signing its method, final URL (host, path, query) and body with the
    current credentials (`credentials`: botocore's, re-read at every signature) for `region_name`."""

    def __init__(self, credentials: Any, region_name: str) -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        self._credentials = credentials
        self._region = region_name
        self._auth = SigV4Auth
        self._request = AWSRequest

    def headers(self, method: str, url: str, body: bytes) -> Mapping[str, str]:
        """The signature headers of `method url` with `body`, signed now."""
        request = self._request(method=method, url=url, data=body)
        self._auth(self._credentials.get_frozen_credentials(), SERVICE, self._region).add_auth(request)
        return {name: value for name, value in request.headers.items() if name.lower() != "content-length"}


@cache
def signer(region_name: str) -> SigV4Signer:
    """This process's signer for `region_name` (its credentials found once, refreshed as they expire)."""
    return SigV4Signer(_credentials(), region_name)
