"""The requests the run's end cut (`metrics.unfinished`): pure, from records (why a run in which none finished
finished none: tests/unit/results/test_no_finish.py)."""

from __future__ import annotations

from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.unfinished import Unfinished, unfinished_of

T_END_S = 100.0


def in_flight(t_send: float, headers: bool = False, token: bool = False, done: bool = False) -> RequestRecord:
    """A record sent at `t_send` (perf_counter s) that got its response headers, a first token, or finished."""
    record = RequestRecord("chat", t_send=t_send)
    if headers:
        record.status_code = 200
        record.t_headers = t_send + 0.01
    if token:
        record.t_first = t_send + 0.1
    if done:
        record.t_done = t_send + 1.0
    return record


def test_records_in_flight_at_the_end_are_counted_by_how_far_they_got():
    records = [
        in_flight(90.0),
        in_flight(94.5),
        in_flight(97.0, headers=True),
        in_flight(91.25, headers=True, token=True),
        in_flight(99.0, headers=True, token=True),
        in_flight(80.0, headers=True, token=True, done=True),  # finished while the users were stopping: counted
    ]
    cut = unfinished_of(records, T_END_S)
    assert cut == Unfinished(no_headers=2, no_headers_longest_s=10.0, no_token=1, no_token_longest_s=3.0,
                             streaming=2, streaming_longest_s=8.75)  # fmt: skip
    assert cut.requests == 5 and cut.longest_s == 10.0
    failed = in_flight(95.0)
    failed.fail(ErrorKind.TIMEOUT, "no data")
    failed.t_done = 99.0  # a failure, like a success or a cancellation, is finished
    assert unfinished_of([failed], T_END_S) == Unfinished() and Unfinished().requests == 0
    status_only = in_flight(99.5)
    status_only.status_code = 200  # the head was read, its arrival not stamped (no connection noted)
    assert unfinished_of([status_only], T_END_S).no_token == 1
    assert unfinished_of([in_flight(99.0001)], T_END_S).no_headers_longest_s == 1.0  # to the ms


def test_workers_counts_add_up_and_travel_as_a_dict():
    one = Unfinished(no_headers=2, no_headers_longest_s=4.0, streaming=1, streaming_longest_s=9.5)
    other = Unfinished(no_headers=1, no_headers_longest_s=6.0, no_token=3, no_token_longest_s=1.0)
    both = one.merge(other)
    assert both == Unfinished(no_headers=3, no_headers_longest_s=6.0, no_token=3, no_token_longest_s=1.0,
                              streaming=1, streaming_longest_s=9.5)  # fmt: skip
    wire = both.as_dict()
    assert wire["requests"] == 7 and Unfinished.from_dict(wire) == both
    assert Unfinished.from_dict({}) == Unfinished()


def test_an_open_loop_request_still_waiting_for_its_due_time_was_never_sent():
    """An open loop's record opened before its due time (`t_send` taken again as it leaves, once due): still before
    `t_sched` when the stop came, it waited and never left — not cut; one that left is."""
    waiting, sent = in_flight(99.99), in_flight(99.5)
    waiting.t_sched, sent.t_sched = 99.995, 99.4
    assert unfinished_of([waiting, sent], T_END_S) == Unfinished(no_headers=1, no_headers_longest_s=0.5)
