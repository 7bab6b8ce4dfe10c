"""The simulator as the clouds' token services and as a verifier of the bearer tokens they issue.

Token endpoints (each issues a random opaque token living `--token-lifetime-s`):
- Databricks OAuth M2M: `POST /oidc/v1/token`, `grant_type=client_credentials`, the client id and secret as HTTP Basic
  credentials (or form fields), checked against `--oauth-client ID:SECRET`.
- Microsoft Entra ID: `GET /{tenant}/v2.0/.well-known/openid-configuration` (the discovery document msal reads) and
  `POST /{tenant}/oauth2/v2.0/token`, `grant_type=client_credentials`, `client_id` and `client_secret` in the form
  (checked against `--oauth-client`), `scope` the Cognitive Services one.
- Google: `POST /token`, `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with a service account's signed
  JWT `assertion`, its RS256 signature checked with the public key of `--google-key-file` (the service account's key
  file), its issuer (the account's email), audience (Google's token endpoint), scope and expiry checked too.
A refused credential gets the provider's error status (400 or 401) with an OAuth error body.

Verifier (`--require-token`): a completion request without `Authorization: Bearer T`, where T was issued here and
has not expired, gets HTTP 401. `GET /sim/tokens` counts tokens issued per flow, token requests refused, completion
requests verified and refused.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson

from llm_locust.sim import http
from llm_locust.sim.apis.wire import ApiError

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_AUDIENCE = "https://oauth2.googleapis.com/token"
"""The audience of a service account's assertion, as google-auth writes it (and Google's endpoint requires)."""
_DISCOVERY_SUFFIX = "/v2.0/.well-known/openid-configuration"
_ENTRA_TOKEN_SUFFIX = "/oauth2/v2.0/token"


class OAuthError(Exception):
    """A refused token request: HTTP `status`, OAuth `error` code and description."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description

    def body(self) -> bytes:
        return orjson.dumps({"error": self.error, "error_description": self.description})


@dataclass
class TokenService:
    """The token endpoints and the verifier (see the module docstring); `scheme` is how clients reach this server
    (http or https), for the discovery document's URLs."""

    lifetime_s: float
    client: tuple[str, str] | None = None
    google_key: dict[str, Any] | None = None
    require_token: bool = False
    scheme: str = "http"
    issued: dict[str, int] = field(default_factory=lambda: {"databricks": 0, "entra": 0, "google": 0})
    token_refused: int = 0
    verified: int = 0
    refused: int = 0
    _expiry: dict[str, float] = field(default_factory=dict)  # token -> its expiry (time.monotonic)
    _public_key: Any = None

    @classmethod
    def from_options(
        cls, lifetime_s: float, client: str, google_key_file: str, require_token: bool, scheme: str
    ) -> TokenService:
        """From the simulator's options (`client`: "ID:SECRET" or ""; `google_key_file`: a service-account key file
        or "")."""
        pair = tuple(client.split(":", 1)) if client else None
        key = json.loads(Path(google_key_file).read_text(encoding="utf-8")) if google_key_file else None
        return cls(lifetime_s, pair, key, require_token, scheme)  # type: ignore[arg-type]

    def serves(self, method: str, path: str) -> bool:
        """Whether `method path` is one of the token routes."""
        if method == "GET":
            return path.endswith(_DISCOVERY_SUFFIX) or path == "/sim/tokens"
        return method == "POST" and (path in ("/oidc/v1/token", "/token") or path.endswith(_ENTRA_TOKEN_SUFFIX))

    def answer(self, request: http.Request) -> tuple[int, bytes]:
        """(status, JSON body) of a token route's `request` (`serves` said yes)."""
        path = request.path
        if path == "/sim/tokens":
            return 200, orjson.dumps(self.counts())
        if path.endswith(_DISCOVERY_SUFFIX):
            return 200, self._discovery(request, path.removesuffix(_DISCOVERY_SUFFIX))
        try:
            form = {name: values[0] for name, values in parse_qs(request.body.decode("utf-8", "replace")).items()}
            if path == "/oidc/v1/token":
                flow = self._databricks(request, form)
            elif path == "/token":
                flow = self._google(form)
            else:
                flow = self._entra(form)
        except OAuthError as e:
            self.token_refused += 1
            return e.status, e.body()
        token = secrets.token_urlsafe(24)
        self._expiry[token] = time.monotonic() + self.lifetime_s
        self.issued[flow] += 1
        body = {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime_s}
        if flow == "entra":
            body["ext_expires_in"] = self.lifetime_s
        return 200, orjson.dumps(body)

    def counts(self) -> dict[str, Any]:
        """Tokens issued per flow, token requests refused, completion requests verified and refused."""
        return {"issued": dict(self.issued), "token_refused": self.token_refused, "verified": self.verified,
                "refused": self.refused}  # fmt: skip

    def reset(self) -> None:
        """Counters back to zero (POST /sim/reset); issued tokens stay valid."""
        self.issued = dict.fromkeys(self.issued, 0)
        self.token_refused = self.verified = self.refused = 0

    def check(self, request: http.Request) -> None:
        """With `require_token`: raise a 401 unless `request` carries a bearer token issued here, unexpired."""
        if not self.require_token:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        expiry = self._expiry.get(token) if scheme.lower() == "bearer" else None
        if expiry is None or expiry <= time.monotonic():
            self.refused += 1
            what = "missing" if not token else ("unknown" if expiry is None else "expired")
            raise ApiError(401, "AuthenticationError", f"bearer token {what}")
        self.verified += 1

    # -- flows -------------------------------------------------------------------------
    def _discovery(self, request: http.Request, tenant_path: str) -> bytes:
        base = f"{self.scheme}://{request.headers.get('host', '127.0.0.1')}{tenant_path}"
        return orjson.dumps({
            "token_endpoint": base + _ENTRA_TOKEN_SUFFIX,
            "authorization_endpoint": base + "/oauth2/v2.0/authorize",
            "issuer": base + "/v2.0",
        })  # fmt: skip

    def _check_client(self, client_id: str, secret: str) -> None:
        if self.client is None or (client_id, secret) != self.client:
            raise OAuthError(401, "invalid_client", "client authentication failed")

    def _databricks(self, request: http.Request, form: dict[str, str]) -> str:
        if form.get("grant_type") != "client_credentials":
            raise OAuthError(400, "unsupported_grant_type", "grant_type must be client_credentials")
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "basic":
            client_id, _, secret = base64.b64decode(encoded).decode("utf-8", "replace").partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        self._check_client(client_id, secret)
        return "databricks"

    def _entra(self, form: dict[str, str]) -> str:
        if form.get("grant_type") != "client_credentials":
            raise OAuthError(400, "unsupported_grant_type", "grant_type must be client_credentials")
        if ENTRA_SCOPE not in form.get("scope", "").split():
            raise OAuthError(400, "invalid_scope", f"scope must be {ENTRA_SCOPE}")
        self._check_client(form.get("client_id", ""), form.get("client_secret", ""))
        return "entra"

    def _google(self, form: dict[str, str]) -> str:
        """The JWT-bearer grant: the assertion signed with the service account's key, issued by its email, for
        Google's token endpoint (`GOOGLE_AUDIENCE`, whatever the key file's token_uri), with the cloud-platform scope,
        unexpired."""
        if form.get("grant_type") != JWT_BEARER:
            raise OAuthError(400, "unsupported_grant_type", f"grant_type must be {JWT_BEARER}")
        key = self.google_key
        if key is None:
            raise OAuthError(400, "invalid_grant", "no service account is known here (--google-key-file)")
        try:
            header_b64, payload_b64, signature_b64 = form.get("assertion", "").split(".")
            header, claims = _b64json(header_b64), _b64json(payload_b64)
            signature = _b64(signature_b64)
        except ValueError:
            raise OAuthError(400, "invalid_grant", "the assertion is not a JWT") from None
        if header.get("alg") != "RS256" or header.get("kid") != key.get("private_key_id"):
            raise OAuthError(400, "invalid_grant", "the assertion's alg or kid is wrong")
        if not self._signed(f"{header_b64}.{payload_b64}".encode(), signature):
            raise OAuthError(400, "invalid_grant", "Invalid JWT Signature.")
        now = time.time()
        if claims.get("iss") != key.get("client_email") or claims.get("aud") != GOOGLE_AUDIENCE:
            raise OAuthError(400, "invalid_grant", "the assertion's iss or aud is wrong")
        if GOOGLE_SCOPE not in str(claims.get("scope", "")).split() or not claims.get("exp", 0) > now:
            raise OAuthError(400, "invalid_grant", "the assertion's scope is missing or it has expired")
        return "google"

    def _signed(self, message: bytes, signature: bytes) -> bool:
        """Whether `signature` is the service account's RS256 signature of `message` (needs `cryptography`)."""
        import cryptography.exceptions as crypto_errors  # plain imports: its modules are lazy (no __spec__)
        import cryptography.hazmat.primitives.asymmetric.padding as padding
        import cryptography.hazmat.primitives.hashes as hashes
        import cryptography.hazmat.primitives.serialization as serialization

        if self._public_key is None:
            pem = self.google_key["private_key"].encode()  # type: ignore[index]
            private = serialization.load_pem_private_key(pem, None)
            self._public_key = private.public_key()
        try:
            self._public_key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
        except crypto_errors.InvalidSignature:
            return False
        return True


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64json(text: str) -> dict[str, Any]:
    value = json.loads(_b64(text))
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value
