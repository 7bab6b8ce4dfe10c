"""When a run ends before its time: the limits that stop it, decided from its request counts so far."""

from __future__ import annotations

from dataclasses import dataclass

ABORT_MIN_REQUESTS = 20
"""`--abort-error-rate` judges a run only once this many requests finished."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A run's limits: a trace's `trace_requests` all sent, `--max-requests`, `--abort-error-rate` (0: none)."""

    trace_requests: int = 0
    max_requests: int = 0
    abort_error_rate: float = 0.0

    def stop_reason(self, finished: int, ok: int, failed: int, tls_rejected: int) -> str | None:
        """The reason to end the run now, after `finished` requests (`ok` succeeded, `failed` failed, `tls_rejected`
        of them because the server's TLS certificate was rejected), or None.

        A rejected certificate ends the run while no request has succeeded: no later request can do better.
        """
        if self.trace_requests and finished >= self.trace_requests:
            return f"the trace's {self.trace_requests} requests were sent"
        if self.max_requests and finished >= self.max_requests:
            return f"--max-requests {self.max_requests} reached"
        if tls_rejected and not ok:
            return "the server's TLS certificate was rejected"
        abort = self.abort_error_rate
        if abort and finished >= ABORT_MIN_REQUESTS and failed / finished > abort:
            return f"error rate {failed / finished:.0%} exceeded --abort-error-rate {abort:g}"
        return None
