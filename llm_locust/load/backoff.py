"""A closed-loop user's pause after a request that failed without an answer (`--backoff-max-s`).

A closed loop sends a user's next request as soon as its last one ended. When requests fail at once — nothing
listening, a TLS set-up that cannot work, a server answering JSON where a stream was asked for — that loop spins at
CPU speed: 2 users made 13,000–20,000 connection attempts in 8 s against a closed port. So a user whose request
failed without an answer (`without_answer`) waits before its next one: `FIRST_PAUSE_S`, doubling with each such
failure in a row, at most `--backoff-max-s` (default `DEFAULT_MAX_S`), each pause jittered by ±`JITTER`; its next
success starts it over. The shape is gRPC's "Connection Backoff Protocol" (exponential,
jittered ±20 % so that users who failed together do not retry together, capped), with a load test's times instead of
a long-lived channel's (1 s first, 120 s cap): one refused connection during a server's restart costs a user
0.1 s, and a server that comes back is found within 5 s.

Failures that came with an answer do not pause: HTTP 429 and 5xx, an error or a cut inside a stream, a timeout.
They are the endpoint's answer to the load, what the test measures, and each took the server's time; pausing after
them would lower the offered load exactly when the endpoint is overloaded. The exception is the configuration-class
failure (`limits.CONFIGURATION_KINDS`: HTTP 4xx — a wrong model or key) while nothing in the process has succeeded:
no later request can do better, and the run is about to end (`limits.configuration_failure`).

Open loop (`--request-rate`, sweeps of rates, a trace): no pause. The arrivals are the load asked for, whatever the
answers, so a failing server gets exactly that many requests per second (counted as failures): pausing would either
drop arrivals or send them later in a burst.
"""

from __future__ import annotations

import random

from llm_locust.load.limits import CONFIGURATION_KINDS
from llm_locust.metrics.record import ErrorKind, RequestRecord

FIRST_PAUSE_S = 0.1
"""The pause after the first failure without an answer since the user's last success, seconds (before jitter)."""
GROWTH = 2.0
"""Each further failure in a row multiplies the pause by this."""
JITTER = 0.2
"""Each pause is drawn uniformly within ±this share of its value (then capped)."""
DEFAULT_MAX_S = 5.0
"""`--backoff-max-s`'s default: the longest pause, seconds."""

NO_ANSWER_KINDS = frozenset({ErrorKind.CONNECT, ErrorKind.TLS})
"""Failure kinds that never come with a response: the connection or its TLS handshake failed."""


def without_answer(record: RequestRecord, process_succeeded: bool) -> bool:
    """Whether failed request `record` had no answer the run can measure: no response at all (`NO_ANSWER_KINDS`; a
    connection reset or closed before the response head: `transport` with no status and no token), a response that is
    not the stream or body asked for (`bad_stream` before any token: e.g. HTTP 200 with JSON where SSE was asked for),
    or a configuration-class failure (`limits.CONFIGURATION_KINDS`) while nothing has succeeded in this process
    (`process_succeeded`). False for a request that did not fail."""
    kind = record.error_kind
    if kind is None:
        return False
    if kind in NO_ANSWER_KINDS:
        return True
    if kind is ErrorKind.TRANSPORT:
        return record.status_code == 0 and record.events == 0
    if kind is ErrorKind.BAD_STREAM:
        return record.events == 0
    return kind in CONFIGURATION_KINDS and not process_succeeded


class Backoff:
    """One user's pauses: `after(record, ...)` says how long to wait before its next request (seconds, 0: none).

    `max_s` is the longest pause (0: never pause); `rng` draws the jitter.
    """

    def __init__(self, max_s: float, rng: random.Random) -> None:
        self.max_s = max_s
        self.rng = rng
        self.failures = 0  # failures without an answer since the user's last success

    def after(self, record: RequestRecord, process_succeeded: bool) -> float:
        """The pause before the user's next request, seconds, after its request `record` ended (`process_succeeded`:
        some request of this process has succeeded): growing with each failure without an answer (`without_answer`)
        in a row, 0 after any other outcome; a success (or a cancelled stream: the server answered) starts it over.
        Always 0 in open loop (the record has a due time, `t_sched`) and with `max_s` 0."""
        if record.error_kind is None:
            self.failures = 0
            return 0.0
        if not self.max_s or record.t_sched is not None or not without_answer(record, process_succeeded):
            return 0.0
        self.failures += 1
        base_s = FIRST_PAUSE_S * GROWTH ** min(self.failures - 1, 64)  # (bounded: no float overflow)
        return min(self.max_s, base_s * self.rng.uniform(1 - JITTER, 1 + JITTER))
