"""How a run ends, decided from plain values: the process's exit code, why no request finished, the open loop's
behind-schedule warning and which workers count as lost. The Locust side (`runtime.results_writer`) gathers the values
and applies the answers.

Exit codes (README.md "Troubleshooting"): 0 passed, 1 nothing succeeded for a reason outside the command (or a task
raised: Locust's `--exit-code-on-error`), 2 bad input, 3 a gate failed or a worker was lost, 4 interrupted, 5 the
client was limited (`metrics.client_error`), 6 the results could not be written (`EXIT_WRITE_FAILED`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llm_locust.metrics.step_check import SCHEDULE_LAG_MS
from llm_locust.metrics.unfinished import Unfinished
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.files import iso_time

EXIT_WRITE_FAILED = 6
"""Exit code of a run whose results could not be written (disk full, the results folder removed): its load was
stopped at the failed write."""
INTERRUPT_GRACE_S = 5.0
"""A worker that said goodbye this shortly (seconds) before the master was interrupted quit with
it (Ctrl-C reaches every process of the terminal): it is not counted as lost."""


def exit_code(
    current: int | None, cause: str | None, interrupted: bool, verdict: Mapping[str, Any], task_errors: int = 0
) -> int:
    """The process's exit code once the run is over — final: written into summary.json's `verdict.exit_code` and
    set as the process's, never left to Locust (whose own code is 1 as soon as any request failed).

    `current`: the code set so far (an earlier error: 2 for bad input, 4 interrupted; None or 0: none); `cause`: why
    nothing succeeded (`outcome.diagnose`), or None; `verdict`: summary.json's; `task_errors`: the code for exceptions
    the tasks raised (Locust's `--exit-code-on-error`, 1 by default; 0: none raised). Nothing succeeded: 2 when the
    command is wrong (`USER_ERROR_CAUSES`), else 1 unless interrupted. A failed gate gives the verdict's code where no
    earlier error set one; a passed verdict 0 — failed requests within `--max-error-rate` are judged by the gate, not
    Locust's "errors" — unless a task raised.
    """
    code = current or 0
    user_error = cause in USER_ERROR_CAUSES
    if cause is not None and not code and (user_error or not interrupted):
        code = 2 if user_error else 1
    if not verdict["passed"] and not code:
        code = verdict["exit_code"]
    return code or task_errors


def write_failure(path: Path, error: OSError) -> str:
    """The one line saying that writing the results file `path` failed with `error` (the system's reason: "No space
    left on device"), that the load stops, and the exit code."""
    return (
        f"cannot write {path}: {error.strerror or error} — the load is stopped; summary.json keeps what was measured "
        f"if it can still be written, whole (exit code {EXIT_WRITE_FAILED})"
    )


def no_finish(window: WindowMetrics, unfinished: Unfinished) -> tuple[str, str] | None:
    """Why no request of `window` finished — none succeeded, failed or was cancelled — while `unfinished` requests
    were cut by the run's end: (cause, one line with the fix), from the furthest any of them got; None when a request
    finished (`outcome.diagnose` says why none succeeded) or none was in flight.

    Causes: `no_headers` (a server that accepts connections and does not answer), `no_token` (answered, generated
    nothing within the run), `no_finish` (tokens arrived, no stream ended: e.g. `--max-tokens` longer than the run).
    None of them is in the command for sure (`USER_ERROR_CAUSES`): a longer run would have failed them as timeouts.
    """
    if window.requests_finished or not unfinished.requests:
        return None
    n = unfinished.requests
    in_flight = f"{n} request{'s' if n > 1 else ''} in flight"
    if unfinished.streaming:
        return "no_finish", (
            f"no request finished: first tokens arrived but no stream finished ({in_flight}, the longest "
            f"{unfinished.longest_s:.1f} s) — e.g. --max-tokens longer than the run: lower --max-tokens or lengthen "
            "--run-time"
        )
    if unfinished.no_token:
        return "no_token", (
            f"no request finished: response headers but no token after {unfinished.no_token_longest_s:.1f} s "
            f"({in_flight}) — the server took the requests and generated nothing within the run (queued, or its "
            "model still loading): check its logs, lower the load or lengthen --run-time"
        )
    return "no_headers", (
        f"no request finished: no response headers after {unfinished.no_headers_longest_s:.1f} s ({in_flight}) — "
        "the server accepts connections but does not answer: check that --host is the inference server and that it "
        "is not stuck (its logs, its queue)"
    )


def behind_schedule(window_start_epoch_s: float, queue_delay_ms: Mapping[str, Any]) -> str | None:
    """The warning of an open loop whose requests left late in the window from `window_start_epoch_s` (its client
    queue delay distribution, ms): when its p90 is above `SCHEDULE_LAG_MS` — every user busy, or the client
    saturated —, else None."""
    if not queue_delay_ms["count"] or queue_delay_ms["p90"] <= SCHEDULE_LAG_MS:
        return None
    return (
        f"open loop fell behind its schedule from {iso_time(window_start_epoch_s)}: p90 client queue delay "
        f"{queue_delay_ms['p90']:.0f} ms (all users busy: raise -u / --max-concurrency, or the client is "
        "saturated: add worker processes); the offered rate was not achieved"
    )


def lost_workers(missing: Iterable[str], goodbyes: Mapping[str, float], interrupted_at_s: float | None) -> set[str]:
    """The workers lost: those that stopped reporting (`missing`), and those that quit mid-test on their own
    (`goodbyes`: worker → when it said so, epoch s) — not those that quit with the master's interrupt (at
    `interrupted_at_s`, epoch s), up to `INTERRUPT_GRACE_S` before it."""
    cutoff_s = float("inf") if interrupted_at_s is None else interrupted_at_s - INTERRUPT_GRACE_S
    return set(missing) | {worker for worker, t_s in goodbyes.items() if t_s < cutoff_s}


_FIXES = {
    "connect": "check --host (scheme, address, port) and that the server is running",
    "tls": "openssl s_client -connect HOST:PORT -showcerts shows the certificate the server presents",
    "http_401": "the API key was rejected: put a valid key in the variable named by --api-key-env "
    "(default OPENAI_API_KEY, or the --provider's own) or pass --api-key",
    "aws_credentials": "AWS refused the SigV4 signature (--provider bedrock): check AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or AWS_PROFILE), that the key is active and this host's clock",
    "aws_access": "the AWS identity may not call the model: allow it bedrock:InvokeModelWithResponseStream (and "
    "bedrock:CallWithBearerToken for an API key) on the model or inference profile",
    "http_404": "check --model (GET /v1/models lists the served names) and the path in --host",
    "tls_scheme": "give --host the scheme the server speaks",
    "http_4xx": "the server rejected the requests: check --model, --max-tokens and --extra-body",
    "redirect": "the server redirected every request, and llm-locust follows no redirect (it would send the key "
    "elsewhere): point --host at the final URL, the Location in the reason",
    "http_429": "the endpoint throttled every request: lower the load (-u, the rate) or raise its rate limit",
    "http_5xx": "the server failed every request: check its logs",
    "timeout": "raise --connect-timeout-s / --first-token-timeout-s / --read-timeout-s, or lower the load",
    "server_lost": "the server answered at first, then refused connections: it stopped or crashed during the run "
    "(check its logs)",
}
_FALLBACK_FIX = "check that --host is an OpenAI-compatible endpoint that streams (SSE)"
_GOOGLE_BAD_KEY = "API key not valid"
"""What Google answers (HTTP 400, INVALID_ARGUMENT) to a wrong API key."""
USER_ERROR_CAUSES = (
    "connect",
    "tls",
    "tls_scheme",
    "http_401",
    "aws_credentials",
    "aws_access",
    "http_404",
    "http_4xx",
    "redirect",
)
_AWS_REFUSALS = ("Check your AWS Secret Access Key", "The security token included in the request is",
                 "Signature expired", "Missing Authentication Token")  # fmt: skip
"""What AWS's 403 answers say when the signature or the credentials are wrong (InvalidSignatureException,
UnrecognizedClientException, ExpiredTokenException, MissingAuthenticationTokenException)."""
"""Causes of a run in which nothing succeeded that the user fixes in the command (exit code 2)."""


def diagnose(window: WindowMetrics, top_error: str | None) -> tuple[str, str] | None:
    """Why no request of `window` succeeded, when none did and some failed: (cause, one line).

    `top_error` is the most frequent failure message (from Locust's error statistics); it tells
    a 401/403 and a 404 apart from other client errors. Returns None when a request succeeded.
    """
    failed = window.requests_failed
    if window.requests_ok or not failed:
        return None
    kind = window.failures.most_common(1)[0][0]
    cause = kind
    text = top_error or ""
    if kind == "connect" and len(window.failures) > 1:  # other kinds were answers: the host was right
        cause = "server_lost"
    elif kind == "tls" and ("use http://" in text or "use https://" in text):
        cause = "tls_scheme"
    elif kind == "http_4xx" and "HTTP 403" in text and any(refusal in text for refusal in _AWS_REFUSALS):
        cause = "aws_credentials"
    elif kind == "http_4xx" and "HTTP 403" in text and "is not authorized to perform: bedrock:" in text:
        cause = "aws_access"
    elif kind == "http_4xx" and ("HTTP 401" in text or "HTTP 403" in text or _GOOGLE_BAD_KEY in text):
        cause = "http_401"
    elif kind == "http_4xx" and "HTTP 404" in text:
        cause = "http_404"
    kinds = ", ".join(f"{k} {v}" for k, v in window.failures.most_common())
    first = f"; most frequent: {text}" if text else ""
    line = f"no request succeeded ({failed} failed: {kinds}){first} — {_FIXES.get(cause, _FALLBACK_FIX)}"
    return cause, line
