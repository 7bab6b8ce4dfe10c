"""The master–worker link's authentication, hooked into Locust's ZeroMQ sockets (the decisions: `config.link_auth`).

- The command line (`check_command_line`, on Locust's parser, right after its first parse — before `--processes`
  forks and before any socket exists): `--processes` gets a free port of 127.0.0.1 and a fresh secret in the
  environment its workers inherit; a master or worker whose link the secret does not allow stops with one line
  (exit 2); without a secret, a master's default `--master-bind-host` is 127.0.0.1 (`bind_loopback_by_default`).
- Every socket Locust makes for the link (`locust.rpc.zmqrpc.BaseSocket`, the master's ROUTER and a worker's DEALER)
  gets the CURVE keys of `LLM_LOCUST_MASTER_SECRET` before it binds or connects (`install`). A worker whose handshake
  is refused, none succeeding, says why in one line and exits 2; a master says once that a stranger was refused.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import gevent
import zmq.green as zmq
from locust.rpc import zmqrpc
from zmq.utils.monitor import recv_monitor_message

from llm_locust.config.link_auth import (
    HANDSHAKE_FAILURES,
    LOOPBACK,
    MASTER_BIND_DEFAULT,
    SECRET_ENV,
    LinkKeys,
    handshake_refused,
    processes_link,
    refusal,
    stranger_refused,
)
from llm_locust.runtime.runner_ops import after_first_parse

logger = logging.getLogger("llm_locust")

EXIT_LINK_REFUSED = 2
"""The exit code of a process the link refuses (a bad configuration)."""
_STRANGER = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
"""A handshake that failed on a key or mechanism (not a connection closed before it: a health check's)."""
_FAILED = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | _STRANGER
_STOPPED = zmq.EVENT_MONITOR_STOPPED
"""The socket closed (its monitor stops): the watch ends. Monitors are made before the socket binds or connects, so
that no event is lost."""
HANDSHAKE = "llm_locust_handshake"
"""The attribute of a worker's socket object (`zmqrpc.Client`) holding the greenlet that watches its handshakes until
one succeeds: whoever monitors the socket next waits for it (`master_watch`)."""


def install() -> None:
    """Give each of Locust's link sockets the CURVE keys of the secret in the environment (idempotent)."""
    init = zmqrpc.BaseSocket.__init__
    if getattr(init, "llm_locust_link", False):
        return

    def init_with_keys(self: Any, sock_type: int, ipv4_only: bool) -> None:
        init(self, sock_type, ipv4_only)
        secret = os.environ.get(SECRET_ENV, "")
        _authenticate(self, sock_type == zmq.ROUTER, _keys(secret) if secret else None)

    init_with_keys.llm_locust_link = True  # type: ignore[attr-defined]
    zmqrpc.BaseSocket.__init__ = init_with_keys  # type: ignore[method-assign]


@functools.lru_cache(maxsize=2)
def _keys(secret: str) -> LinkKeys:
    """`LinkKeys.of(secret)`, derived once per process (scrypt takes tens of ms; a worker reconnects with a new
    socket)."""
    return LinkKeys.of(secret)


def _authenticate(base: Any, master: bool, keys: LinkKeys | None) -> None:
    """CURVE on the socket of `base` (Locust's socket object: a master's, or a worker's) with `keys` (None: no
    secret, ZeroMQ's unauthenticated NULL), and the watch of its handshakes: a master's until a stranger fails one, a
    worker's until the first one succeeds (`HANDSHAKE`: then the socket's monitor is `master_watch`'s)."""
    sock = base.socket
    if master:
        if keys is not None:
            sock.curve_server = True
            sock.curve_publickey, sock.curve_secretkey = keys.server_public, keys.server_secret
        gevent.spawn(_watch_strangers, sock, sock.get_monitor_socket(_STRANGER | _STOPPED))  # before it binds
        return
    if keys is not None:
        sock.curve_serverkey = keys.server_public
        sock.curve_publickey, sock.curve_secretkey = keys.client_public, keys.client_secret
    monitor = sock.get_monitor_socket(_FAILED | zmq.EVENT_HANDSHAKE_SUCCEEDED | _STOPPED)  # before it connects
    setattr(base, HANDSHAKE, gevent.spawn(_await_handshake, sock, monitor))


def _watch_strangers(sock: Any, monitor: Any) -> None:
    """Master: say once that a process failed the handshake (a stranger, or a worker with another secret or none) —
    a connection closed before any handshake, e.g. a health check's, is no such process."""
    event = _read(sock, monitor, lambda _: True)
    if event is not None:
        logger.warning("%s", stranger_refused(_port(event)))


def _await_handshake(sock: Any, monitor: Any) -> None:
    """Worker: return once a handshake with the master succeeds (the monitor handed back); after one refused on its
    key or mechanism (ZeroMQ then stops reconnecting), or `HANDSHAKE_FAILURES` connections closed during it in a row,
    say why in one line and exit 2."""
    failures = 0

    def decided(event: dict[str, Any]) -> bool:
        nonlocal failures
        if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            return True
        failures += HANDSHAKE_FAILURES if event["event"] & _STRANGER else 1  # a key or mechanism refused: at once
        return failures >= HANDSHAKE_FAILURES

    event = _read(sock, monitor, decided)
    if event is None or event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
        return
    host = event["endpoint"].decode(errors="replace").removeprefix("tcp://").rpartition(":")[0]
    logger.error("%s", handshake_refused(host, _port(event)))
    sys.exit(EXIT_LINK_REFUSED)  # raised in the main greenlet: the worker ends, before any test or after its own


def _read(sock: Any, monitor: Any, decided: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """Read `sock`'s `monitor` until an event `decided` it (returned; None: the socket closed first), then close the
    monitor: the socket can be monitored anew."""
    try:
        while (event := recv_monitor_message(monitor))["event"] != _STOPPED:
            if decided(event):
                return event
    except zmq.ZMQError:  # the socket closed
        pass
    finally:
        if not sock.closed:
            sock.disable_monitor()
        monitor.close(linger=0)
    return None


def _port(event: dict[str, Any]) -> int:
    """The port of a monitor `event`'s endpoint ("tcp://HOST:PORT")."""
    return int(event["endpoint"].decode(errors="replace").rpartition(":")[2])


def bind_loopback_by_default(parser: Any) -> None:
    """Without a secret, a master's default --master-bind-host is 127.0.0.1 (Locust's: every interface); an explicit
    value still wins (and `check_command_line` refuses it if it is another interface)."""
    if not os.environ.get(SECRET_ENV) and parser.get_default("master_bind_host") == "*":
        parser.set_defaults(master_bind_host=MASTER_BIND_DEFAULT)


def check_command_line(parser: Any) -> None:
    """Locust's `init_command_line_parser` listener: a master's default bind address (`bind_loopback_by_default`),
    and the link settled once Locust's main has parsed the process's command line (`settle`)."""
    bind_loopback_by_default(parser)
    after_first_parse(parser, settle)


def settle(options: Any) -> None:
    """The link of the process whose parsed `options` these are: a `--processes` master's own port and secret (its
    forked workers inherit both); a master's or worker's refused in one line on stderr, exit 2."""
    worker = bool(getattr(options, "worker", False))
    if getattr(options, "processes", None) and not worker:
        link = processes_link()
        os.environ[SECRET_ENV] = link.secret
        options.master_bind_host = options.master_host = LOOPBACK
        options.master_bind_port = options.master_port = link.port
        return
    if not worker and not getattr(options, "master", False):
        return
    role, host = ("worker", options.master_host) if worker else ("master", options.master_bind_host)
    why = refusal(role, host, os.environ.get(SECRET_ENV, ""))
    if why is not None:  # Locust sets up its logging only after parsing: the line goes to stderr
        sys.stderr.write(f"{why}\n")
        sys.exit(EXIT_LINK_REFUSED)
