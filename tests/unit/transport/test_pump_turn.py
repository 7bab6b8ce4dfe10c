"""The stream pump's turn ends by the next send due (`pump.turn_end`): an open loop's users send on time."""

from __future__ import annotations

import heapq

from llm_locust.transport.pump import turn_end


def test_a_turn_lasts_its_length_with_no_send_due():
    assert turn_end(10.0, 0.002, []) == 10.002


def test_a_turn_ends_at_the_earliest_send_due_within_it():
    sends = [10.0015, 10.0005, 10.5]
    heapq.heapify(sends)
    assert turn_end(10.0, 0.002, sends) == 10.0005
    assert sorted(sends) == [10.0005, 10.0015, 10.5]  # kept until their time passes


def test_sends_due_by_now_are_dropped_and_the_next_one_counts():
    sends = [9.9, 10.0, 10.001]
    heapq.heapify(sends)
    assert turn_end(10.0, 0.002, sends) == 10.001
    assert sends == [10.001]


def test_a_send_due_after_the_turn_does_not_shorten_it():
    sends = [10.1]
    assert turn_end(10.0, 0.002, sends) == 10.002
    assert sends == [10.1]
