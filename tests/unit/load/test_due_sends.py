"""The sends a process's users are about to make (`load.due_sends`): what the pump's turn and the other work on the
event loop make way for."""

from __future__ import annotations

from llm_locust.load.due_sends import STALE_S, DueSends


def test_the_next_send_is_the_earliest_pending_one():
    sends = DueSends()
    assert sends.next_s(10.0) is None
    late, early = sends.add(10.5), sends.add(10.1)
    assert sends.next_s(10.0) == 10.1
    sends.sent(early)
    assert sends.next_s(10.0) == 10.5
    sends.sent(late)
    assert sends.next_s(10.0) is None
    assert len(sends) == 0


def test_a_send_due_already_is_next_until_it_left():
    sends = DueSends()
    handle = sends.add(10.0)
    assert sends.next_s(10.001) == 10.0  # its user has not run yet: the others still wait
    sends.sent(handle)
    assert sends.next_s(10.001) is None


def test_a_send_long_past_its_due_time_is_forgotten():
    sends = DueSends()
    sends.add(10.0)  # its user never sends (its request failed to build)
    assert sends.next_s(10.0 + STALE_S * 0.9) == 10.0
    assert sends.next_s(10.0 + STALE_S * 1.1) is None
    assert len(sends) == 0


def test_the_same_instant_twice_is_two_sends():
    sends = DueSends()
    first, second = sends.add(10.0), sends.add(10.0)
    sends.sent(first)
    assert sends.next_s(10.0) == 10.0
    sends.sent(second)
    assert sends.next_s(10.0) is None
