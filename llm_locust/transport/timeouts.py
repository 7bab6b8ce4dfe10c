"""First-token, read (idle) and whole-request timeouts for in-flight requests, from one greenlet.

A socket timeout costs a gevent timer start and cancel on every read — several µs per token
event. Instead, the streaming loop only stamps `Watch.t_active_s` when bytes arrive, and one
greenlet per process checks every in-flight request a few times a second, raising
`RequestTimeout` in the request's greenlet when it has been silent for `read_timeout_s`, has
had no generated token for `first_token_timeout_s` since it was sent (its record's `t_first` is
still None: keep-alive comments and role-only chunks do not count), or has run for
`request_timeout_s`. Timeouts therefore fire up to `check_interval_s` late. (The connect
timeout is the socket's own, set on Locust's client.)

`RequestTimeout` is a `TimeoutError` (an `OSError`): while waiting for the response headers
Locust's FastHttp session reports it like any connection error, while reading the stream the
client classifies it — both as the `timeout` failure kind.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import gevent
from gevent.hub import get_hub

from llm_locust.transport.background import Background


class RequestTimeout(TimeoutError):
    """A request was silent or ran for too long; the message says which."""


class Watch:
    """One in-flight request: its greenlet and record, when bytes last arrived, its deadlines
    (perf_counter s)."""

    __slots__ = ("active", "deadline_s", "first_token_deadline_s", "greenlet", "record", "t_active_s")

    def __init__(self, greenlet: object, record: Any, deadline_s: float, first_token_deadline_s: float) -> None:
        self.greenlet = greenlet
        self.record = record
        self.t_active_s = record.t_send
        self.deadline_s = deadline_s
        self.first_token_deadline_s = first_token_deadline_s
        self.active = True


class TimeoutWatchdog:
    """Enforces the read, first-token and whole-request timeouts on the requests it watches."""

    def __init__(
        self,
        read_timeout_s: float,
        request_timeout_s: float,
        first_token_timeout_s: float = float("inf"),
        check_interval_s: float = 0.1,
    ) -> None:
        self.read_timeout_s = read_timeout_s
        self.request_timeout_s = request_timeout_s
        self.first_token_timeout_s = first_token_timeout_s
        self.check_interval_s = check_interval_s
        self._watches: set[Watch] = set()
        self._checker = Background(self._run)

    @property
    def in_flight(self) -> int:
        """Requests being watched now (sent, not yet finished)."""
        return len(self._watches)

    def records(self) -> list[Any]:
        """The records of the requests being watched now (sent, not yet finished; `metrics.unfinished`)."""
        return [watch.record for watch in self._watches]

    def start(self, record: Any, first_token: bool = True) -> Watch:
        """Watch the current greenlet's request (a `RequestRecord`: its `t_send`, `t_first`), with the first-token
        timeout when `first_token` (not for a request without tokens: embeddings); call `end` when it is over."""
        t_send_s = record.t_send
        first_token_s = self.first_token_timeout_s if first_token else float("inf")
        watch = Watch(gevent.getcurrent(), record, t_send_s + self.request_timeout_s, t_send_s + first_token_s)
        self._watches.add(watch)
        self._checker.ensure()
        return watch

    def end(self, watch: Watch) -> None:
        """Stop watching: a timeout can no longer be raised for this request."""
        watch.active = False
        self._watches.discard(watch)

    def stop(self) -> None:
        """Stop the watchdog greenlet (it restarts with the next request)."""
        self._checker.stop()

    def _run(self) -> None:
        while self._watches:
            gevent.sleep(self.check_interval_s)
            now = perf_counter()
            for watch in list(self._watches):
                if now - watch.t_active_s > self.read_timeout_s:
                    self._expire(watch, f"no data for {self.read_timeout_s:g} s (--read-timeout-s)")
                elif now > watch.first_token_deadline_s and watch.record.t_first is None:
                    self._expire(
                        watch, f"no token within {self.first_token_timeout_s:g} s of sending (--first-token-timeout-s)"
                    )
                elif now > watch.deadline_s:
                    self._expire(watch, f"request took longer than {self.request_timeout_s:g} s (--request-timeout-s)")

    def _expire(self, watch: Watch, message: str) -> None:
        self._watches.discard(watch)
        get_hub().loop.run_callback(_throw, watch, RequestTimeout(message))


def _throw(watch: Watch, error: RequestTimeout) -> None:
    """Runs in the hub: raise in the request's greenlet only if that request is still going."""
    if watch.active:
        watch.active = False
        watch.greenlet.throw(error)
