"""Worker: stop this worker's load and quit when its master is gone (`load.master_link` decides when).

Feeds a `MasterLink` with the master's answers to the heartbeats (Locust's `heartbeat_received`) and with the
connection events of the worker's ZeroMQ socket (a socket monitor: closed, open again), checks it every
`CHECK_S`, and when the master is gone says why in one line and quits the runner: its users stop, and the process
exits with `EXIT_MASTER_GONE`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
import zmq
from zmq.utils.monitor import recv_monitor_message

from llm_locust.load.master_link import MasterLink
from llm_locust.runtime.link_auth import HANDSHAKE

logger = logging.getLogger("llm_locust")

CHECK_S = 0.5
"""How often the worker checks its link to the master, seconds."""
EXIT_MASTER_GONE = 1
"""A worker whose master is gone exits with this code (the run failed: its results were the master's to write)."""
_CLOSED = zmq.EVENT_DISCONNECTED
_OPEN = zmq.EVENT_HANDSHAKE_SUCCEEDED


def watch_master(environment: Any, runner: Any) -> None:
    """Watch the master of the worker `runner` until the runner quits (its greenlets are the runner's)."""
    link = MasterLink()
    environment.events.heartbeat_received.add_listener(lambda **_: link.heard(time.monotonic()))
    runner.greenlet.spawn(_follow_connection, runner, link)
    runner.greenlet.spawn(_check, environment, runner, link)


def _check(environment: Any, runner: Any, link: MasterLink) -> None:
    """Every `CHECK_S`: once the master is gone, say why, stop the load and quit the runner."""
    while (why := link.gone(time.monotonic())) is None:
        gevent.sleep(CHECK_S)
    logger.error(
        "the master %s:%s is gone (%s): this worker stops its load and quits (exit code %d)",
        runner.master_host, runner.master_port, why, EXIT_MASTER_GONE,
    )  # fmt: skip
    environment.process_exit_code = EXIT_MASTER_GONE
    gevent.spawn(runner.quit)  # outside the runner's greenlets, which it kills


def _follow_connection(runner: Any, link: MasterLink) -> None:
    """Note each close and re-open of the connection to the master, on whichever socket the runner uses now (Locust
    replaces it when it resets the connection)."""
    while True:
        client = runner.client
        handshake = getattr(client, HANDSHAKE, None)
        if handshake is not None:  # the link's authentication watches the handshake first (`link_auth`)
            handshake.join()
        try:
            monitor = client.socket.get_monitor_socket(_CLOSED | _OPEN)
        except zmq.ZMQError:  # closed: the runner is quitting, or replacing it
            gevent.sleep(CHECK_S)
            continue
        try:
            while client is runner.client:
                event = recv_monitor_message(monitor)["event"]
                if event == _CLOSED:
                    link.closed(time.monotonic())
                elif event == _OPEN:
                    link.opened()
                elif event == zmq.EVENT_MONITOR_STOPPED:  # its socket closed
                    break
        except zmq.ZMQError:
            pass
        finally:
            monitor.close(linger=0)
