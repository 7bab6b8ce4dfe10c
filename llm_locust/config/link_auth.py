"""Who may join the master port: the master–worker link authenticated by a shared secret, and where it may listen.

Locust's master and workers speak ZeroMQ over TCP (`--master-bind-host`/`--master-bind-port`, `--master-host`/
`--master-port`), unauthenticated. With `LLM_LOCUST_MASTER_SECRET` set (the same value in the master's environment
and every worker's), the link runs ZeroMQ's CURVE: both key pairs are derived from the secret (`LinkKeys.of`, scrypt —
so a weak secret is slow to guess from a recorded handshake), the master's public key is never sent, and only a
process that holds the secret completes the handshake — a worker without it cannot join (the master counts it
nowhere), a master without it cannot lead a worker, and the link is encrypted.

Without a secret the link stays on one machine (`refusal`): the master listens on 127.0.0.1 unless told otherwise
(`MASTER_BIND_DEFAULT`, Locust's own default is every interface), a master told to listen on another interface, or a
worker told to join a master on another machine, stops with one line naming `SECRET_ENV`. `--processes` (a master and
its forked workers on one machine) gets its own fresh secret and a free port of 127.0.0.1 (`processes_link`): two runs
never meet.

Pure but for `free_port` (asks the kernel) and the key derivation (pyzmq's Curve25519); applied by
`runtime.link_auth`.
"""

from __future__ import annotations

import hashlib
import secrets
import socket
from dataclasses import dataclass

import zmq
from zmq.utils import z85

from llm_locust.config.web_access import is_loopback

SECRET_ENV = "LLM_LOCUST_MASTER_SECRET"
"""The environment variable holding the link's shared secret (master and workers alike)."""
MIN_SECRET_CHARS = 16
"""A shorter secret is refused: e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`."""
LOOPBACK = "127.0.0.1"
MASTER_BIND_DEFAULT = LOOPBACK
"""Where a master without a secret listens unless `--master-bind-host` says otherwise."""
HANDSHAKE_FAILURES = 3
"""Handshakes in a row whose connection closed (a master refusing a key it cannot read closes it), none succeeding,
after which a worker gives up: its secret is not its master's."""
_SALT = b"llm-locust master link v1"


@dataclass(frozen=True)
class LinkKeys:
    """The CURVE key pairs of a link (Z85 text, as ZeroMQ's options take them): the master's and the workers'."""

    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes

    @classmethod
    def of(cls, secret: str) -> LinkKeys:
        """The key pairs derived from `secret` (deterministic: every process holding it derives the same)."""
        seed = hashlib.scrypt(secret.encode(), salt=_SALT, n=2**14, r=8, p=1, dklen=64)
        server_secret, client_secret = z85.encode(seed[:32]), z85.encode(seed[32:])
        return cls(zmq.curve_public(server_secret), server_secret, zmq.curve_public(client_secret), client_secret)


def secret_refusal(secret: str) -> str | None:
    """Why the link's `secret` ("" for none) cannot be used (one line), or None."""
    if secret and len(secret) < MIN_SECRET_CHARS:
        return (
            f"{SECRET_ENV} is {len(secret)} characters: use at least {MIN_SECRET_CHARS} random ones (e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'), the same for the master and its workers"
        )
    return None


def refusal(role: str, host: str, secret: str) -> str | None:
    """Why a process of `role` ("master": listening on `host`, its --master-bind-host; "worker": joining the master at
    `host`, its --master-host) may not use the link with `secret` ("" for none), in one line; None when it may."""
    bad_secret = secret_refusal(secret)
    if bad_secret is not None or secret or is_loopback(host):
        return bad_secret
    if role == "master":
        where = "every interface" if host in ("*", "", "0.0.0.0", "::") else host
        return (
            f"--master-bind-host {host}: a master listens on {where} only with {SECRET_ENV} set (the same secret in "
            "every worker's environment), so that no one else can join; without it, it listens on 127.0.0.1"
        )
    return (
        f"--master-host {host}: a worker joins a master on another machine only with {SECRET_ENV} set (the same "
        "secret as the master's), so that no one else's master can lead it"
    )


def handshake_refused(host: str, port: int) -> str:
    """A worker's one line when its master refuses the handshake (`HANDSHAKE_FAILURES` in a row)."""
    return (
        f"the master at {host}:{port} refused this worker's handshake: this worker's {SECRET_ENV} is not the "
        "master's (or only one of them has one); this worker sends nothing"
    )


def stranger_refused(port: int) -> str:
    """A master's one line, said once, when a process fails the handshake on its `port`."""
    return (
        f"a process without this run's {SECRET_ENV} tried to join the master port {port}: refused (said once; "
        "it gets nothing)"
    )


@dataclass(frozen=True)
class ProcessesLink:
    """The link of a `--processes` run: a free port of 127.0.0.1 and a fresh secret, its own."""

    port: int
    secret: str


def processes_link() -> ProcessesLink:
    """A new `ProcessesLink`."""
    return ProcessesLink(free_port(), secrets.token_urlsafe(32))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]
