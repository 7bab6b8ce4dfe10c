"""The stream pump's turn ends by the next send due (`pump.turn_end`): an open loop's users send on time."""

from __future__ import annotations

from llm_locust.transport.pump import turn_end


def test_a_turn_lasts_its_length_with_no_send_due():
    assert turn_end(10.0, 0.002, None) == 10.002


def test_a_turn_ends_at_the_next_send_due_within_it():
    assert turn_end(10.0, 0.002, 10.0005) == 10.0005


def test_a_turn_ends_at_once_when_a_send_is_due_already():
    assert turn_end(10.0, 0.002, 9.999) == 9.999  # its user runs as soon as the pump yields


def test_a_send_due_after_the_turn_does_not_shorten_it():
    assert turn_end(10.0, 0.002, 10.1) == 10.002
