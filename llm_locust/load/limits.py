"""When a run ends before its time: the limits that stop it, decided from its request counts so far."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from llm_locust.metrics.record import ErrorKind

ABORT_MIN_REQUESTS = 20
"""`--abort-error-rate` judges a run only once this many requests finished."""

CONFIGURATION_KINDS = {
    ErrorKind.TLS: "the server's TLS set-up does not match the command (certificate or URL scheme)",
    ErrorKind.HTTP_4XX: "every request was refused with HTTP 4xx (model, API key or request)",
    ErrorKind.REDIRECT: "every request was redirected (never followed): point --host at the final URL",
}
"""Failure kinds that a later request cannot escape: the command must change. What ends the run when every failure
so far has one of them."""


def configuration_failure(ok: int, failures: Mapping[str, int]) -> str | None:
    """Why the run cannot succeed (one of `CONFIGURATION_KINDS`), when none of its requests succeeded (`ok`) and every
    one that failed failed with that same kind (`failures`: count by `ErrorKind`); else None."""
    if ok or len(failures) != 1:
        return None
    (kind,) = failures
    return CONFIGURATION_KINDS.get(kind)  # type: ignore[call-overload]  (a StrEnum member equals its value)


@dataclass(frozen=True, slots=True)
class Limits:
    """A run's limits: a trace's `trace_requests` all sent, `--max-requests`, `--abort-error-rate`, `--max-sessions`
    (0: none)."""

    trace_requests: int = 0
    max_requests: int = 0
    abort_error_rate: float = 0.0
    max_sessions: int = 0

    def stop_reason(self, finished: int, ok: int, failures: Mapping[str, int], sessions: int = 0) -> str | None:
        """The reason to end the run now, after `finished` requests (`ok` succeeded, `failures` the failed ones by
        `ErrorKind`) and `sessions` agent sessions ended, or None.

        A command that cannot work ends the run (`configuration_failure`): no later request can do better.
        """
        if self.trace_requests and finished >= self.trace_requests:
            return f"the trace's {self.trace_requests} requests were sent"
        if self.max_requests and finished >= self.max_requests:
            return f"--max-requests {self.max_requests} reached"
        if self.max_sessions and sessions >= self.max_sessions:
            return f"--max-sessions {self.max_sessions} reached"
        configuration = configuration_failure(ok, failures)
        if configuration is not None:
            return configuration
        abort, failed = self.abort_error_rate, sum(failures.values())
        if abort and finished >= ABORT_MIN_REQUESTS and failed / finished > abort:
            return f"error rate {failed / finished:.0%} exceeded --abort-error-rate {abort:g}"
        return None


def drain_over(elapsed_s: float, in_flight: int, min_s: float, max_s: float) -> bool:
    """Whether the pause after a step, begun `elapsed_s` seconds ago, is over: no request in flight once `min_s` have
    passed (on a master: every worker has reported since), or `max_s` have passed (requests still in flight then are
    left out of the step)."""
    return (elapsed_s >= min_s and in_flight == 0) or elapsed_s >= max_s
