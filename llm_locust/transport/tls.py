"""The clients' TLS: one trust store per process, and a rejected certificate — or a URL scheme the server does
not speak — said in one line (`tls_problem`).

Both clients (`fast`: geventhttpclient; `openai-sdk`: httpx) connect with the context of
`client_context`: certificates and host names verified, against the system's trust store (OpenSSL
reads `SSL_CERT_FILE` / `SSL_CERT_DIR` for it), plus `REQUESTS_CA_BUNDLE` when set, plus
`--ca-bundle`. Verification is part of the TLS handshake, before any byte of a request is written,
and happens once per connection. `--insecure` turns it off.
"""

from __future__ import annotations

import functools
import os
import socket
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

import gevent.ssl

from llm_locust.errors import ConfigError
from llm_locust.transport.ca_file import check_ca_file
from llm_locust.transport.endpoint_settings import EndpointSettings
from llm_locust.transport.proxy import Proxy, env_proxy
from llm_locust.transport.replicas import check_hosts, split_hosts

_UNKNOWN_ISSUER = (18, 19, 20, 21)  # self-signed (in chain), unable to get (local) issuer, unable to verify first
_EXPIRED = (9, 10)  # not yet valid, expired
_WRONG_HOST = (62, 64)  # host name mismatch, IP address mismatch
_PLAIN_HTTP_REASONS = frozenset({"WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE",
                                 "UNKNOWN_PROTOCOL", "HTTP_REQUEST"})  # fmt: skip
"""OpenSSL's reasons when the answer to a client hello is not TLS (a plain-HTTP server answering 400)."""
PROBE_TIMEOUT_S = 2.0
"""How long `speaks_tls` waits for the TLS handshake of a server that closed a plain-HTTP connection."""
_FIXES = {
    _UNKNOWN_ISSUER: "unknown issuer: trust its CA with --ca-bundle FILE or SSL_CERT_FILE, or skip checks: --insecure",
    _EXPIRED: "outside its validity dates: renew the server's certificate, or skip checks: --insecure",
    _WRONG_HOST: "wrong host name: put a name the certificate is issued for in --host, or skip checks: --insecure",
}


def client_context(ca_bundle: str = "", insecure: bool = False) -> ssl.SSLContext:
    """This process's TLS context for the endpoint (built once per options and trust-store
    variables, shared by every user and connection); ConfigError naming a CA file that cannot be used."""
    trust_env = tuple(os.environ.get(name, "") for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"))
    return _context(ca_bundle, insecure, trust_env)


@functools.lru_cache(maxsize=4)
def _context(ca_bundle: str, insecure: bool, trust_env: tuple[str, str, str]) -> ssl.SSLContext:
    """`client_context`, given the trust-store variables (OpenSSL reads SSL_CERT_FILE and SSL_CERT_DIR itself)."""
    if insecure:
        context = gevent.ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    context = gevent.ssl.create_default_context()  # the system's store; SSL_CERT_FILE / SSL_CERT_DIR honoured
    ssl_cert_file, _ssl_cert_dir, requests_ca_bundle = trust_env
    extra = [("REQUESTS_CA_BUNDLE", requests_ca_bundle), ("--ca-bundle", ca_bundle)]
    for source, path in (("SSL_CERT_FILE", ssl_cert_file), *extra):
        if path:
            check_ca_file(path, source)
    for source, path in extra:
        if path:
            try:
                context.load_verify_locations(cafile=path)
            except ssl.SSLError as e:
                raise ConfigError(f"{source} {path}: not a usable CA file ({e.reason or e})") from None
    return context


def check_connection(host: str | None, endpoint: EndpointSettings) -> Proxy | None:
    """Raise ConfigError now for what would stop the first connection to the replicas of `host` (Locust's
    --host, `replicas.split_hosts`): a bad URL (one line each), an unusable CA file of an https:// replica, a
    proxy variable the fast client cannot use, several replicas with the openai-sdk client. Returns the fast
    client's proxy of the first replica (None: a direct connection, or the openai-sdk client, whose httpx picks
    its own)."""
    check_hosts(host)
    urls = split_hosts(host)
    if len(urls) > 1 and endpoint.client != "fast":
        raise ConfigError("several --host URLs need the fast client (--client fast): the openai-sdk client has one")
    if any(url.lower().startswith("https://") for url in urls):
        client_context(endpoint.ca_bundle, endpoint.insecure)
    if endpoint.client != "fast":
        return None
    proxies = [env_proxy(url) for url in urls]
    return proxies[0] if proxies else None


def context_factory(ca_bundle: str, insecure: bool) -> Callable[..., ssl.SSLContext]:
    """A geventhttpclient `ssl_context_factory` returning `client_context(ca_bundle, insecure)`
    (it is called with `cafile=`, its own default store, which is left out)."""

    def factory(**_ignored: object) -> ssl.SSLContext:
        return client_context(ca_bundle, insecure)

    return factory


def certificate_error(error: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error behind `error` (following causes and wrapped originals,
    as geventhttpclient, httpx and the openai SDK wrap it), or None."""
    found = _behind(error, ssl.SSLCertVerificationError)
    return found if isinstance(found, ssl.SSLCertVerificationError) else None


def _behind(error: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of type `kind` in `error`'s chain (causes, contexts and wrapped `original`s), or None."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, kind):
            return error
        original = getattr(error, "original", None)
        error = original if isinstance(original, BaseException) else (error.__cause__ or error.__context__)
        seen += 1
    return None


def tls_problem(url: str, error: BaseException | None) -> str | None:
    """One line naming cause and fix when `error` (of a request to `url`, before any response) comes from TLS set up
    wrong in the command: the server's certificate rejected (`rejected_line`), an https:// URL answered in plain
    HTTP, an http:// URL whose server closed the connection and speaks TLS (`speaks_tls`); None for anything else."""
    rejected = certificate_error(error)
    if rejected is not None:
        return rejected_line(url, rejected)
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    ssl_error = _behind(error, ssl.SSLError)
    if isinstance(ssl_error, ssl.SSLError) and ssl_error.reason in _PLAIN_HTTP_REASONS:
        return (f"--host https://{host}: the server answered the TLS handshake in plain HTTP ({ssl_error.reason}): "
                f"use http://{host}; nothing was sent")  # fmt: skip
    closed = _behind(error, ConnectionError) or (error if type(error).__name__ == "HTTPConnectionClosed" else None)
    port = parts.port or 80
    if parts.scheme == "http" and closed is not None and parts.hostname and speaks_tls(parts.hostname, port):
        return f"--host http://{host}: the server speaks TLS (it closed the plain-HTTP connection): use https://{host}"
    return None


@functools.lru_cache(maxsize=16)
def speaks_tls(hostname: str, port: int) -> bool:
    """Whether the server at `hostname`:`port` completes a TLS handshake (certificate not checked: only the protocol
    is asked); asked once per process and server, within `PROBE_TIMEOUT_S`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((hostname, port), timeout=PROBE_TIMEOUT_S) as sock,
            context.wrap_socket(sock, server_hostname=hostname),
        ):
            return True
    except (OSError, ValueError):
        return False


def rejected_line(url: str, error: ssl.SSLCertVerificationError) -> str:
    """One line: the certificate of the host of `url` was rejected, why, and what to do."""
    host = urlsplit(url).netloc.rpartition("@")[2] if "://" in url else url
    code = error.verify_code
    reason = (error.verify_message or error.reason or str(error)).rstrip(".")
    fix = next((text for codes, text in _FIXES.items() if code in codes), "skip checks: --insecure")
    return f"TLS certificate of {host} rejected: {reason} ({fix}); nothing was sent"
