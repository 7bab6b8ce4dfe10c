"""A greenlet doing one job in the background, started at most once at a time.

The request watchdog, the loop monitor and the garbage collector's schedule each keep one such
greenlet: started when first needed (again after it ended by itself), killed without waiting.
"""

from __future__ import annotations

from collections.abc import Callable

import gevent


class Background:
    """Runs `target` in its own greenlet (see the module doc)."""

    __slots__ = ("_greenlet", "_target")

    def __init__(self, target: Callable[[], None]) -> None:
        self._target = target
        self._greenlet: gevent.Greenlet | None = None

    def ensure(self) -> None:
        """Start `target` in a greenlet unless one is running it."""
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._target)

    def stop(self) -> None:
        """Kill the greenlet, if any, without waiting for it."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
