"""Which signal interrupted a Locust process: SIGTERM, or SIGINT (Ctrl-C).

Locust handles both itself (SIGTERM with a gevent signal watcher, SIGINT as KeyboardInterrupt)
and then fires `quitting`, which says nothing of why. `SignalWatch.start()` — called when the run
state is created, before Locust installs its SIGTERM watcher — notes the signal first: libev runs
the watchers of one signal newest first, so ours, the older one, runs before Locust's shutdown;
for SIGINT it chains in front of the handler in place (Python's, which raises KeyboardInterrupt).
A Ctrl-C that lands in a greenlet other than the main one (or gevent's hub) is raised once that greenlet yields,
not in the middle of its work: Python raises KeyboardInterrupt between any two bytecodes, and one raised in the results
writer between taking a time-series window and writing its row lost that window's requests from llm_timeseries.csv
(summary.json counted them); gevent hands it to the main greenlet either way, where Locust stops the process.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any

import gevent


class SignalWatch:
    """Notes the first SIGTERM or SIGINT this process receives while started (`name`) and when (`t_s`, epoch seconds:
    the load ends there, however long Locust's own shutdown then takes before `quitting`)."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.t_s: float | None = None
        self._term: Any = None
        self._previous_int: Any = None

    def start(self) -> None:
        """Watch SIGTERM and SIGINT (idempotent; SIGINT only from the main thread, as Python allows)."""
        if self._term is not None:
            return
        self._term = gevent.signal_handler(signal.SIGTERM, self._note, signal.SIGTERM)
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGINT)
        if callable(previous):  # Python's (KeyboardInterrupt) or one installed by someone else
            self._previous_int = previous
            signal.signal(signal.SIGINT, self._on_sigint)

    def stop(self) -> None:
        """Stop watching; put back the SIGINT handler found by `start` (if ours is still in place)."""
        if self._term is not None:
            self._term.cancel()
            self._term = None
        if self._previous_int is not None and signal.getsignal(signal.SIGINT) == self._on_sigint:
            signal.signal(signal.SIGINT, self._previous_int)
        self._previous_int = None

    def _note(self, signum: int) -> None:
        if self.name is None:
            self.name = signal.Signals(signum).name
            self.t_s = time.time()

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self._note(signum)
        hub = gevent.get_hub()
        if gevent.getcurrent() in (hub, hub.parent):
            # Python's handler raises KeyboardInterrupt (a whole-line call: no caret line in its traceback)
            self._previous_int(signum, frame)
        else:  # raised in the hub once this greenlet yields, which gevent hands to the main greenlet
            hub.loop.run_callback(self._previous_int, signum, None)
