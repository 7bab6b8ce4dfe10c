"""The simulator's check of AWS Signature Version 4 (`--sigv4 ACCESS_KEY:SECRET[:SESSION_TOKEN]`): each request's
signature recomputed with botocore (imported only when asked to verify) from the test credential, and refused as
Bedrock refuses it — HTTP 403 with AWS's error shape (`AwsError`: `{"message"}` and the `x-amzn-ErrorType` header).

What is checked, as AWS does: an `Authorization: AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request,
SignedHeaders=..., Signature=...` header; the access key is the test one (`UnrecognizedClientException`); the session
token, when the credential has one, is sent in `X-Amz-Security-Token` and signed; `host` and `x-amz-date` are signed,
the date within 5 minutes of now and of the scope's day; the service is `bedrock`; the signature equals botocore's
over the method, the path as received, the query, the signed headers and the body's SHA-256
(`InvalidSignatureException`).
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson

from llm_locust.sim.apis.wire import ApiError

SERVICE = "bedrock"
_MAX_SKEW = timedelta(minutes=5)
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<signed>[a-z0-9;-]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key "
    "and signing method. Consult the service documentation for details."
)


class AwsError(ApiError):
    """An AWS-style refusal: HTTP `status`, its `type` (the `x-amzn-ErrorType` header) and `message`."""

    def body(self) -> bytes:
        """AWS's JSON error body: `{"message": ...}`."""
        return orjson.dumps({"message": self.message})

    def headers(self) -> tuple[str, ...]:
        """The `x-amzn-ErrorType` header line."""
        return (f"x-amzn-ErrorType: {self.type}:http://internal.amazon.com/coral/com.amazon.coral.service/",)


@dataclass(frozen=True)
class Credential:
    """The test credential requests must be signed with."""

    access_key: str
    secret_key: str
    token: str = ""

    @classmethod
    def parse(cls, text: str) -> Credential:
        """`ACCESS_KEY:SECRET[:SESSION_TOKEN]`; ValueError unless both keys are there."""
        access_key, _, rest = text.strip().partition(":")
        secret_key, _, token = rest.partition(":")
        if not access_key or not secret_key:
            raise ValueError("--sigv4: expected ACCESS_KEY:SECRET[:SESSION_TOKEN] (or @FILE holding that)")
        return cls(access_key, secret_key, token)


def check_botocore() -> None:
    """ValueError naming the extra to install when botocore is missing."""
    try:
        import botocore.auth  # noqa: F401
    except ImportError:
        raise ValueError("--sigv4 recomputes signatures with botocore: pip install 'llm-locust[aws]'") from None


def verify(
    credential: Credential,
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
    now: datetime | None = None,
) -> None:
    """Raise `AwsError` (403) unless the request (`headers` with lower-case names, `path` as received) carries a valid
    SigV4 signature of `credential` for Bedrock."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    given = _AUTHORIZATION.fullmatch(headers.get("authorization", "").strip())
    if given is None:
        raise AwsError(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    if not hmac.compare_digest(given["key"], credential.access_key):
        raise AwsError(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    signed = given["signed"].split(";")
    if credential.token and (
        "x-amz-security-token" not in signed
        or not hmac.compare_digest(headers.get("x-amz-security-token", ""), credential.token)
    ):
        raise AwsError(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    if "host" not in signed or "x-amz-date" not in signed or any(name not in headers for name in signed):
        raise AwsError(403, "InvalidSignatureException", "'Host' and 'X-Amz-Date' must be signed, and sent")
    if given["service"] != SERVICE:
        raise AwsError(
            403, "InvalidSignatureException", f"Credential should be scoped to correct service: '{SERVICE}'."
        )
    stamp = headers["x-amz-date"]
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise AwsError(
            403, "InvalidSignatureException", f"Date must be in ISO-8601 basic format, got {stamp}"
        ) from None
    now = now or datetime.now(UTC)
    if abs(now - signed_at) > _MAX_SKEW or not stamp.startswith(given["date"]):
        raise AwsError(403, "InvalidSignatureException", f"Signature expired: {stamp} is now earlier or later")
    url = f"http://{headers['host']}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, data=body, headers={name: headers[name] for name in signed})
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(credential.access_key, credential.secret_key, credential.token or None),
                       SERVICE, given["region"])  # fmt: skip
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, given["signature"]):
        raise AwsError(403, "InvalidSignatureException", _MISMATCH)
