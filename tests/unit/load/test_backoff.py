"""A closed-loop user's pauses after failures without an answer (`load.backoff`), pure: which failures pause, how the
pauses grow, jitter, cap, and what starts them over."""

from __future__ import annotations

import random

import pytest

from llm_locust.load.backoff import DEFAULT_MAX_S, FIRST_PAUSE_S, GROWTH, JITTER, Backoff, without_answer
from llm_locust.metrics.record import ErrorKind, RequestRecord


def record(
    kind: ErrorKind | None = None, status: int = 0, events: int = 0, t_sched: float | None = None
) -> RequestRecord:
    """A finished request: failed with `kind` (None: succeeded), its HTTP `status` (0: no response head), `events`
    token events before it ended, due at `t_sched` (open loop; None: closed loop)."""
    r = RequestRecord(endpoint="chat", t_send=1.0, t_sched=t_sched, status_code=status, events=events)
    if kind is not None:
        r.fail(kind, "failed")
    return r


@pytest.mark.parametrize(
    ("failed", "expected"),
    [
        (record(ErrorKind.CONNECT), True),  # refused, unreachable, connect timeout
        (record(ErrorKind.TLS), True),  # certificate rejected, wrong scheme
        (record(ErrorKind.TRANSPORT), True),  # reset or closed before the response head
        (record(ErrorKind.TRANSPORT, status=200, events=3), False),  # reset half-way through a stream
        (record(ErrorKind.BAD_STREAM, status=200), True),  # HTTP 200 with JSON where a stream was asked for
        (record(ErrorKind.BAD_STREAM, status=200, events=4), False),  # a chunk that is not JSON, half-way
        (record(ErrorKind.HTTP_429, status=429), False),  # throttled: the endpoint's answer to the load
        (record(ErrorKind.HTTP_5XX, status=503), False),
        (record(ErrorKind.TIMEOUT), False),  # took its whole timeout: no spin, and the server's time
        (record(ErrorKind.STREAM_ERROR, status=200, events=2), False),
        (record(ErrorKind.INCOMPLETE, status=200, events=2), False),
        (record(ErrorKind.NO_TOKENS, status=200), False),
        (record(), False),  # a success
    ],
)
def test_which_failures_had_no_answer(failed: RequestRecord, expected: bool) -> None:
    assert without_answer(failed, process_succeeded=True) is expected


def test_a_configuration_failure_pauses_only_while_nothing_in_the_process_succeeded() -> None:
    """HTTP 4xx (a wrong model or key) before any success: no later request can do better, the run is ending
    (`limits.configuration_failure`); after a success it is one request's problem (e.g. a prompt too long)."""
    refused = record(ErrorKind.HTTP_4XX, status=404)
    assert without_answer(refused, process_succeeded=False)
    assert not without_answer(refused, process_succeeded=True)


def test_pauses_double_within_their_jitter_up_to_the_cap_and_a_success_starts_over() -> None:
    backoff = Backoff(DEFAULT_MAX_S, random.Random(1))
    pauses = [backoff.after(record(ErrorKind.CONNECT), False) for _ in range(10)]
    for n, pause_s in enumerate(pauses):
        base_s = FIRST_PAUSE_S * GROWTH**n
        assert min(DEFAULT_MAX_S, base_s * (1 - JITTER)) <= pause_s <= min(DEFAULT_MAX_S, base_s * (1 + JITTER))
    assert pauses[-1] == DEFAULT_MAX_S  # 0.1 s * 2^9 = 51 s: capped
    assert backoff.after(record(), True) == 0.0  # a success: no pause, and the next failure pauses the least again
    again_s = backoff.after(record(ErrorKind.CONNECT), True)
    assert FIRST_PAUSE_S * (1 - JITTER) <= again_s <= FIRST_PAUSE_S * (1 + JITTER)


def test_failures_in_a_row_take_as_long_as_the_doubling_says() -> None:
    """What bounds the attempts: after n failures in a row a user has paused ~0.1 s * (2^n - 1) (until the cap): its
    attempts come at 0, 0.1, 0.3, 0.7, 1.5, 3.1 and 6.3 s, so 2 users against a closed port make about 14 in 8 s."""
    backoff = Backoff(DEFAULT_MAX_S, random.Random(2))
    total_s = sum(backoff.after(record(ErrorKind.CONNECT), False) for _ in range(6))
    assert (1 - JITTER) * 6.3 <= total_s <= (1 + JITTER) * 6.3  # 0.1 + 0.2 + ... + 3.2


def test_jitter_spreads_users_that_failed_together() -> None:
    first = [Backoff(DEFAULT_MAX_S, random.Random(seed)).after(record(ErrorKind.CONNECT), False) for seed in range(50)]
    assert len(set(first)) == 50 and max(first) - min(first) > FIRST_PAUSE_S * JITTER


def test_other_failures_neither_pause_nor_start_the_pauses_over() -> None:
    backoff = Backoff(DEFAULT_MAX_S, random.Random(3))
    backoff.after(record(ErrorKind.CONNECT), False)
    assert backoff.after(record(ErrorKind.HTTP_5XX, status=502), False) == 0.0
    assert backoff.after(record(ErrorKind.CONNECT), False) >= FIRST_PAUSE_S * GROWTH * (1 - JITTER)  # the second


def test_a_cancelled_stream_starts_the_pauses_over() -> None:
    backoff = Backoff(DEFAULT_MAX_S, random.Random(4))
    backoff.after(record(ErrorKind.CONNECT), False)
    cancelled = record(status=200, events=3)
    cancelled.cancelled = True
    assert backoff.after(cancelled, True) == 0.0 and backoff.failures == 0


def test_no_pause_in_open_loop_nor_when_turned_off() -> None:
    """Open loop: the arrivals are the load asked for, whatever the answers (a due time on the record); --backoff-max-s
    0: the user sends its next request at once, as before."""
    assert Backoff(DEFAULT_MAX_S, random.Random(5)).after(record(ErrorKind.CONNECT, t_sched=0.5), False) == 0.0
    off = Backoff(0.0, random.Random(6))
    assert all(off.after(record(ErrorKind.CONNECT), False) == 0.0 for _ in range(5))


def test_a_cap_below_the_first_pause_is_the_pause() -> None:
    assert Backoff(0.05, random.Random(7)).after(record(ErrorKind.TLS), False) == 0.05
