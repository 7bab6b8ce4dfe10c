"""Why a run in which no request finished finished none (`results.outcome.no_finish`), from the requests its end cut
(`metrics.unfinished.Unfinished`), and its exit code: pure, from plain values."""

from __future__ import annotations

from llm_locust.metrics.unfinished import Unfinished
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.outcome import USER_ERROR_CAUSES, exit_code, no_finish


def window(ok: int = 0, failed: int = 0, cancelled: int = 0) -> WindowMetrics:
    w = WindowMetrics()
    w.requests_ok, w.requests_cancelled = ok, cancelled
    if failed:
        w.failures["timeout"] = failed
    return w


def test_no_finish_names_the_furthest_stage_with_its_fix():
    silent = Unfinished(no_headers=2, no_headers_longest_s=8.04)
    cause, line = no_finish(window(), silent)
    assert cause == "no_headers"
    assert line == (
        "no request finished: no response headers after 8.0 s (2 requests in flight) — the server accepts connections "
        "but does not answer: check that --host is the inference server and that it is not stuck (its logs, its queue)"
    )
    answered = Unfinished(no_headers=1, no_headers_longest_s=9.0, no_token=1, no_token_longest_s=7.5)
    cause, line = no_finish(window(), answered)
    assert cause == "no_token"
    assert line.startswith("no request finished: response headers but no token after 7.5 s (2 requests in flight)")
    assert "lengthen --run-time" in line
    long = Unfinished(no_token=1, no_token_longest_s=3.0, streaming=1, streaming_longest_s=12.0)
    cause, line = no_finish(window(), long)
    assert cause == "no_finish"
    assert line == (
        "no request finished: first tokens arrived but no stream finished (2 requests in flight, the longest 12.0 s) "
        "— e.g. --max-tokens longer than the run: lower --max-tokens or lengthen --run-time"
    )
    assert "1 request in flight)" in no_finish(window(), Unfinished(no_headers=1, no_headers_longest_s=1.0))[1]


def test_no_finish_only_when_nothing_finished_and_something_was_cut():
    cut = Unfinished(no_headers=2, no_headers_longest_s=5.0)
    assert no_finish(window(ok=1), cut) is None
    assert no_finish(window(failed=1), cut) is None  # the failures say why (`outcome.diagnose`)
    assert no_finish(window(cancelled=3), cut) is None  # closed on purpose: they finished
    assert no_finish(window(), Unfinished()) is None  # nothing was sent at all


def test_a_run_that_finished_nothing_exits_1_not_as_a_wrong_command():
    """A longer run would have failed the requests as timeouts (exit 1): the same code, whatever the run's length."""
    failed = {"passed": False, "exit_code": 3}
    for cause in ("no_headers", "no_token", "no_finish"):
        assert cause not in USER_ERROR_CAUSES
        assert exit_code(None, cause, False, failed, False) == 1
