"""geventhttpclient's `ConnectionPool`, adjusted for streaming measurements — applied by `install()`, never at import.

Three methods are replaced, process-wide (geventhttpclient has no hook for them):

- `_is_socket_alive` polls with the original `select` (no switch to the hub between `t_send` and the send);
- `_create_tcp_socket` makes `StampedSocket`s, which keep the kernel's receive time of the response head;
- `_setup_proxy` turns a refused CONNECT (a bare RuntimeError) into a `ProxyError`, a connection failure.

`install()` is called by the Locust wiring (`runtime.plugin.install`); importing this module changes nothing.
"""

from __future__ import annotations

import socket
from typing import Any

import gevent.socket
from gevent.monkey import get_original
from geventhttpclient.connectionpool import ConnectionPool

from llm_locust.transport.kernel_time import KERNEL_TIMESTAMPS, SO_TIMESTAMPNS, StampedRecv

_select = get_original("select", "select")


def pooled_socket_alive(_pool: Any, sock: Any) -> bool:
    """True when an idle keep-alive socket from the pool can carry the next request: open, and
    nothing to read (a readable idle socket is closed or dirty). Replaces geventhttpclient's
    `ConnectionPool._is_socket_alive`, which polls with gevent's `select`: even with a zero
    timeout that switches to the hub, so other greenlets — the pump reading hundreds of streams —
    ran between a request's `t_send` and its send, adding up to ~14 ms to TTFT at 500 streams
    (p99 3.8 ms; benchmarks/RESULTS.md). The same poll with the original `select` does not yield.
    """
    if sock is None:
        return False
    try:
        return sock.fileno() >= 0 and not _select([sock], [], [], 0.0)[0]
    except (OSError, ValueError):
        return False


class StampedSocket(StampedRecv, gevent.socket.socket):
    """The client's TCP socket: geventhttpclient reads the response head with `recv`, which here
    keeps the kernel's receive time (`t_arrival_s`). A token that came in the same read as the
    head (the request's greenlet got to it late) gets that time, not the time it was parsed."""

    __slots__ = ("t_arrival_s",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.t_arrival_s = 0.0
        if KERNEL_TIMESTAMPS:
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def stamped_tcp_socket(_pool: Any, family: int, kind: int, proto: int) -> StampedSocket:
    """geventhttpclient's TCP socket factory (`ConnectionPool._create_tcp_socket`), stamped."""
    return StampedSocket(family, kind, proto)


class ProxyError(ConnectionError):
    """The proxy (HTTPS_PROXY) did not open the tunnel to the host: a connection failure."""


def open_tunnel(pool: Any, sock: Any) -> None:
    """geventhttpclient's CONNECT through the proxy (`ConnectionPool._setup_proxy`), whose refusal
    — a bare RuntimeError, which Locust's session does not catch: a traceback per request — is
    raised as a `ProxyError`, counted as a `connect` failure like any connection error."""
    try:
        _ORIGINAL["_setup_proxy"](pool, sock)
    except RuntimeError as e:
        raise ProxyError(f"proxy {pool._connection_host}:{pool._connection_port}: {e}") from None


_ORIGINAL: dict[str, Any] = {}
"""geventhttpclient's own methods, kept by the first `install()` (`open_tunnel` calls the original CONNECT)."""


def install() -> None:
    """Replace the three `ConnectionPool` methods (idempotent: a second call changes nothing)."""
    if _ORIGINAL:
        return
    replacements = {
        "_is_socket_alive": pooled_socket_alive,
        "_create_tcp_socket": stamped_tcp_socket,
        "_setup_proxy": open_tunnel,
    }
    for name, replacement in replacements.items():
        _ORIGINAL[name] = getattr(ConnectionPool, name)
        setattr(ConnectionPool, name, replacement)
