"""When a worker's master is gone: the decision that stops an orphaned worker's load, from what the worker saw.

A worker hears its master in two ways: the master answers each of the worker's heartbeats (one a second), and the
worker's ZeroMQ socket reports its TCP connection closing and coming back. A master killed outright (kill -9, a lost
pod) closes no test and sends no "quit": the kernel closes its socket, and the worker sees the connection close at
once. A master cut off by the network closes nothing: then only its silence tells.

Both signals can lie for a moment: a connection can drop and come back (ZeroMQ reconnects on its own), and a busy
master (or a worker whose own loop stalled) can answer late. So a closed connection counts after `CLOSED_GRACE_S`
without coming back, silence after `SILENCE_S`, and a stall of the worker's own checks restarts both clocks (the
answers may be waiting, unread). Locust's own limit is 60 s of silence (`MASTER_HEARTBEAT_TIMEOUT`), during which an
orphaned worker keeps loading the endpoint.

Pure: the times are given (seconds on one monotonic clock); `runtime.master_watch` feeds it and acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass

CLOSED_GRACE_S = 2.0
"""A closed connection to the master that has not come back after this long: the master is gone."""
SILENCE_S = 10.0
"""No answer from the master for this long (the connection still looking open): the master is gone."""
STALL_S = 1.5
"""A gap this long between two checks means the worker's own loop stalled: the clocks restart (what arrived meanwhile
may not be read yet)."""


@dataclass
class MasterLink:
    """What a worker knows of its link to the master (see the module docstring); times in seconds, monotonic."""

    closed_grace_s: float = CLOSED_GRACE_S
    silence_s: float = SILENCE_S
    stall_s: float = STALL_S
    heard_s: float | None = None  # the master's last answer (None: not heard yet, nothing to judge)
    closed_s: float | None = None  # since when the connection is closed (None: open)
    checked_s: float | None = None  # the last check (`gone`)

    def heard(self, t_s: float) -> None:
        """The master answered at `t_s` (it is there, and so is the connection)."""
        self.heard_s = t_s
        self.closed_s = None

    def closed(self, t_s: float) -> None:
        """The connection to the master closed at `t_s`."""
        if self.closed_s is None:
            self.closed_s = t_s

    def opened(self) -> None:
        """The connection to the master is open again."""
        self.closed_s = None

    def gone(self, now_s: float) -> str | None:
        """Why the master is gone at `now_s` (one phrase, e.g. "its connection closed 2.1 s ago and did not come
        back"), or None while it may still be there — also before it was ever heard (a worker waiting for its master
        to start is not orphaned)."""
        stalled = self.checked_s is not None and now_s - self.checked_s >= self.stall_s
        self.checked_s = now_s
        if self.heard_s is None:
            return None
        if stalled:  # restart the clocks: the worker could not hear anything meanwhile
            self.heard_s = now_s
            if self.closed_s is not None:
                self.closed_s = now_s
            return None
        if self.closed_s is not None and now_s - self.closed_s >= self.closed_grace_s:
            return f"its connection closed {now_s - self.closed_s:.1f} s ago and did not come back"
        if now_s - self.heard_s >= self.silence_s:
            return f"no answer to this worker's heartbeats for {now_s - self.heard_s:.1f} s"
        return None
