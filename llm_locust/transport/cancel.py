"""Streams the client closes early, as impatient users and client timeouts do (`--cancel-rate P` with
`--cancel-after-tokens N` or `--cancel-after-ms T`).

Each user draws for each request whether to cancel it (probability P, from its own random stream, seeded from the
workload's, which --seed seeds). A cancelled request's stream is closed — its connection closed, so that the server
sees the client leave — once N token events have arrived, or T ms after it was sent (a timer, so also before the
first token or the response head). Its record is then marked `cancelled`: not a failure; its TTFT counts, its E2E and
output tokens are kept apart (`metrics.window.WindowMetrics.add`).
"""

from __future__ import annotations

import random

import gevent
from gevent.hub import get_hub

from llm_locust.transport.settings import CancelSettings


class StreamCancelled(OSError):
    """Closes a cancelled stream: raised by the client when the stream reached its token limit, thrown into the
    request's greenlet by the timer of `--cancel-after-ms`. An OSError, so that while the response head is awaited
    Locust's session reports it as a connection error (`resp.error`), which the client recognises."""


class Cancel:
    """The cancellation of one request: after `after_tokens` token events (0: not by tokens) or `after_ms` after
    `start` is called (0: not by time)."""

    __slots__ = ("_greenlet", "_timer", "after_ms", "after_tokens")

    def __init__(self, after_tokens: int, after_ms: float) -> None:
        self.after_tokens = after_tokens
        self.after_ms = after_ms
        self._timer = None
        self._greenlet = None

    def start(self) -> None:
        """The request is being sent now, from the current greenlet: start the timer of `after_ms`."""
        if self.after_ms:
            self._greenlet = gevent.getcurrent()
            self._timer = get_hub().loop.timer(self.after_ms / 1000)
            self._timer.start(self._fire)

    def _fire(self) -> None:
        """Runs in the hub when the time is up: close the stream unless the request ended meanwhile."""
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is not None:
            greenlet.throw(StreamCancelled(f"cancelled {self.after_ms:g} ms after sending (--cancel-after-ms)"))

    def stop(self) -> None:
        """The request is over (or is being reported): nothing may be thrown into its greenlet from now on."""
        self._greenlet = None
        if self._timer is not None:
            self._timer.close()
            self._timer = None


class Canceller:
    """One user's draws: which of its requests to cancel, and when (see the module docstring)."""

    def __init__(self, settings: CancelSettings, seed: int) -> None:
        self.rate = settings.cancel_rate
        self.after_tokens = settings.cancel_after_tokens
        self.after_ms = settings.cancel_after_ms
        self._rng = random.Random(seed)

    def draw(self) -> Cancel | None:
        """The cancellation of the next request, or None when it runs to its end."""
        if self.rate and self._rng.random() < self.rate:
            return Cancel(self.after_tokens, self.after_ms)
        return None
