"""geventhttpclient's `ConnectionPool`, adjusted for streaming measurements — applied by `install()`, never at import.

These methods are replaced, process-wide (geventhttpclient has no hook for them):

- `_is_socket_alive` polls with the original `select` (no switch to the hub between `t_send` and the send);
- `_create_tcp_socket` makes `StampedSocket`s, which keep the kernel's receive time of the response head;
- `_setup_proxy` turns a refused CONNECT (a bare RuntimeError) into a `ProxyError`, a connection failure;
- `_connect_socket` times the TCP connect (plain and TLS pools) and, for https, makes a `TLSConnection`
  (`tls_memory`: TLS decrypted in memory over the raw socket, so the pump reads it like plain TCP) instead of
  an `ssl.SSLSocket`;
- `get_socket` notes which connection each request's greenlet took (`take_checked_out`: new or reused, its connect
  and handshake times) and gives a new one to a greenlet retrying a stale kept-alive connection (`fresh_only`).

`install()` is called by the Locust wiring (`runtime.plugin.install`); importing this module changes nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import perf_counter
from typing import Any
from weakref import WeakKeyDictionary

import gevent.socket
from gevent import getcurrent
from gevent.monkey import get_original
from geventhttpclient.connectionpool import ConnectionPool, SSLConnectionPool

from llm_locust.transport.kernel_time import KERNEL_TIMESTAMPS, SO_TIMESTAMPNS, StampedRecv, connect_rtt_s
from llm_locust.transport.tls_memory import TLSConnection

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
    head (the request's greenlet got to it late) gets that time, not the time it was parsed.

    `connect_s`: how long its TCP connect took (and the proxy's CONNECT tunnel, if any), seconds;
    `requests`: how many requests have taken it from the pool (1: the first); `t_sent_s`: when its last `sendall`
    returned (perf_counter s): the last byte of a request handed to the kernel."""

    __slots__ = ("connect_s", "requests", "t_arrival_s", "t_sent_s")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.t_arrival_s = 0.0
        self.t_sent_s = 0.0
        self.connect_s = 0.0
        self.requests = 0
        if KERNEL_TIMESTAMPS:
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def sendall(self, data: Any, flags: int = 0) -> None:
        super().sendall(data, flags)
        self.t_sent_s = perf_counter()


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


def timed_connect(pool: Any, sock: StampedSocket, address: Any) -> StampedSocket:
    """geventhttpclient's TCP connect (`ConnectionPool._connect_socket`), its time kept on `sock` (`connect`)."""
    connect(pool, sock, address, False)
    return sock


def connect(pool: Any, sock: StampedSocket, address: Any, tunnel: bool) -> None:
    """Connect `sock` to `address` (and open the CONNECT tunnel through the proxy `pool` speaks to, if `tunnel`);
    `sock.connect_s` is how long it took: the kernel's TCP handshake round trip (`kernel_time.connect_rtt_s`), or to
    the arrival of the proxy's answer to CONNECT — not the client's wait to be scheduled after them (the time
    this greenlet took, where the kernel says neither)."""
    t_start = perf_counter()
    sock.connect(address)
    rtt_s = connect_rtt_s(sock)
    if tunnel:
        pool._setup_proxy(sock)
        rtt_s = sock.t_arrival_s - t_start if sock.t_arrival_s > t_start else None
    sock.connect_s = rtt_s if rtt_s is not None else perf_counter() - t_start


def tls_connect(pool: Any, sock: StampedSocket, address: Any) -> TLSConnection:
    """`SSLConnectionPool._connect_socket`: the TCP connect, the proxy's CONNECT tunnel if any (both timed), then
    the TLS handshake with the pool's context and server name over the same raw socket — a `TLSConnection`
    instead of geventhttpclient's `SSLSocket`, with the same checks and the same `ssl` exceptions."""
    connect(pool, sock, address, pool._use_proxy)
    server_hostname = pool.ssl_options.get("server_hostname", pool._request_host)
    return TLSConnection(sock, pool.ssl_context, server_hostname)


_checked_out: WeakKeyDictionary[Any, Any] = WeakKeyDictionary()
"""Per greenlet, the connection its last request took from a pool (a greenlet sends one request at a time)."""
_fresh_only: WeakKeyDictionary[Any, bool] = WeakKeyDictionary()
"""The greenlets whose next request must go on a new connection (`fresh_connection`)."""
_before_checkout: WeakKeyDictionary[Any, Callable[[], None]] = WeakKeyDictionary()
"""Per greenlet, what its next request calls right before it takes a connection (`before_checkout`)."""


def take_checked_out() -> Any:
    """The connection (`StampedSocket` or `TLSConnection`) the current greenlet's last request took, forgotten
    here; None if none since the last call. Its `requests` says whether it was new (1) or reused, `connect_s` (and
    `tls_handshake_s`) its set-up, `t_arrival_s` the arrival of its last read."""
    return _checked_out.pop(getcurrent(), None)


@contextmanager
def before_checkout(hook: Callable[[], None]) -> Iterator[None]:
    """Within it, the current greenlet's next request calls `hook` right before it takes a connection from its pool
    (once: a request sent again on a new connection does not). What the HTTP client does before — the request's URL,
    headers, cookies and head assembled — is done by then; what is left is taking the connection and writing."""
    current = getcurrent()
    _before_checkout[current] = hook
    try:
        yield
    finally:
        _before_checkout.pop(current, None)


@contextmanager
def fresh_connection() -> Iterator[None]:
    """Within it, the current greenlet's requests go on new connections (never an idle one from the pool)."""
    _fresh_only[getcurrent()] = True
    try:
        yield
    finally:
        _fresh_only.pop(getcurrent(), None)


def noted_socket(pool: Any) -> Any:
    """`ConnectionPool.get_socket`, noting which connection the current greenlet took (`take_checked_out`); a new
    one under `fresh_connection`; after the greenlet's `before_checkout` hook, if any."""
    current = getcurrent()
    hook = _before_checkout.pop(current, None)
    if hook is not None:
        hook()
    if current in _fresh_only:
        pool._semaphore.acquire()  # as the original does before making a connection
        try:
            sock = pool._create_socket()
        except BaseException:
            pool._semaphore.release()
            raise
    else:
        sock = _ORIGINAL["get_socket"](pool)
    sock.requests += 1
    _checked_out[current] = sock
    return sock


_ORIGINAL: dict[str, Any] = {}
"""geventhttpclient's own methods, kept by the first `install()` (`open_tunnel` calls the original CONNECT)."""


def install() -> None:
    """Replace the `ConnectionPool` and `SSLConnectionPool` methods (idempotent: a second call changes nothing)."""
    if _ORIGINAL:
        return
    replacements = {
        "_is_socket_alive": pooled_socket_alive,
        "_create_tcp_socket": stamped_tcp_socket,
        "_setup_proxy": open_tunnel,
        "_connect_socket": timed_connect,
        "get_socket": noted_socket,
    }
    for name, replacement in replacements.items():
        _ORIGINAL[name] = getattr(ConnectionPool, name)
        setattr(ConnectionPool, name, replacement)
    SSLConnectionPool._connect_socket = tls_connect
