"""The global arrival sequence (load/sequence.py): due times every process agrees on, and an assignment that sends
each arrival exactly once through joins and leaves."""

from __future__ import annotations

import numpy as np

from llm_locust.load.sequence import Assignment, DueTimes


def owners(assignment: Assignment, n: int) -> list[str]:
    return [assignment.owner(i) for i in range(n)]


def test_every_process_builds_the_same_due_times():
    a = DueTimes.of_process(50.0, "gamma", 0.5, seed=11)
    b = DueTimes.of_process(50.0, "gamma", 0.5, seed=11)
    assert [a.due_s(i) for i in range(500)] == [b.due_s(i) for i in range(500)]
    assert b.first_at(a.due_s(300)) == 300 and b.first_at(a.due_s(300) + 1e-9) == 301
    constant = DueTimes.of_process(4.0, "constant", 1.0, seed=1, limit=10)
    assert [constant.due_s(i) for i in range(11)] == [i / 4 for i in range(10)] + [None]
    assert constant.first_at(100.0) == 10  # past the end: the limit


def test_trace_times_end_with_the_trace():
    due = DueTimes([0.0, 0.5, 0.5, 2.0])
    assert due.limit == 4 and due.due_s(3) == 2.0 and due.due_s(4) is None
    assert due.first_at(0.5) == 1 and DueTimes([0.0, 1.0, 2.0], limit=2).due_s(2) is None


def test_round_robin_and_a_join_only_moves_arrivals_after_the_switch():
    start = Assignment.of(["w2", "w1", "w3"])
    assert owners(start, 6) == ["w1", "w2", "w3", "w1", "w2", "w3"]
    joined = start.then(100, ["w1", "w2", "w3", "w4"])
    assert owners(joined, 100) == owners(start, 100)
    assert owners(joined, 108)[100:] == ["w1", "w2", "w3", "w4"] * 2
    assert joined.changed_from(start) == 100 and start.changed_from(start) is None
    assert joined.members == ("w1", "w2", "w3", "w4")


def test_a_leaving_process_hands_over_only_its_own_arrivals():
    start = Assignment.of(["a", "b", "c"])
    after = start.without("b", 30, ["a", "c"]).then(90, ["a", "c"])
    before, now = owners(start, 200), owners(after, 200)
    assert now[:30] == before[:30]
    for i in range(30, 90):  # b's arrivals shared by a and c in turn; nobody else's moved
        assert now[i] == before[i] if before[i] != "b" else now[i] in ("a", "c")
    handed = [now[i] for i in range(30, 90) if before[i] == "b"]
    assert handed.count("a") == handed.count("c") == 10
    assert "b" not in now[30:] and now[90:] == ["a", "c"] * 55
    # a second leave nests inside the first hand-over: still nobody else's arrivals move
    again = after.without("c", 50, ["a"])
    assert all(again.owner(i) == after.owner(i) for i in range(50)) and set(owners(again, 200)[50:]) == {"a"}
    assert Assignment.from_wire(again.to_wire()) == again


def test_gamma_sequence_has_the_requested_burstiness():
    due = DueTimes.of_process(100.0, "gamma", 0.25, seed=3)
    gaps = np.diff([due.due_s(i) for i in range(20_000)])
    cv = gaps.std() / gaps.mean()  # gamma with shape k: CV = 1/sqrt(k) = 2
    assert abs(gaps.mean() - 0.01) < 0.001 and 1.8 < cv < 2.2
