"""The global arrival sequence (load/sequence.py): due times every process agrees on, and an assignment that sends
each arrival exactly once through joins and leaves."""

from __future__ import annotations

import numpy as np

from llm_locust.load.sequence import Assignment, Cursor, DueTimes, Sharing


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


def test_sharing_reassigns_from_the_switch_and_hands_over_from_the_low_water_mark():
    """The master's assignment as processes come and go: unchanged members change nothing; a join moves only the
    arrivals from the first one due at the switch time; a process that left hands over from its reported mark."""
    due = DueTimes.of_process(10.0, "constant", 1.0, seed=1)  # arrival i due at about i / 10 s
    sharing = Sharing(due, ["a", "b"])
    assert not sharing.changed(["a", "b"], {"a", "b"})
    assert sharing.changed(["a", "b", "c"], {"a", "b", "c"})
    start = sharing.assignment
    switch, gone = sharing.reassign(["a", "b", "c"], {"a", "b", "c"}, 4.95)
    assert (switch, gone) == (50, [])
    assert owners(sharing.assignment, 50) == owners(start, 50)
    assert owners(sharing.assignment, 56)[50:] == [("a", "b", "c")[i % 3] for i in range(50, 56)]
    joined = sharing.assignment
    sharing.note_low_water("b", 41)  # b had handed out every one of its arrivals before #41
    assert sharing.changed(["a", "c"], {"a", "c"})
    switch, gone = sharing.reassign(["a", "c"], {"a", "c"}, 7.95)
    assert (switch, gone) == (80, [("b", 41)])
    now = owners(sharing.assignment, 100)
    assert now[:41] == owners(joined, 41)  # before b's mark nothing moved
    assert all(now[i] == joined.owner(i) for i in range(41, 80) if joined.owner(i) != "b")
    assert "b" not in now[41:] and now[80:] == ["a", "c"] * 10
    assert not sharing.changed(["a", "c"], {"a", "c"})  # b is no longer assigned anything


def test_sharing_hands_over_from_the_switch_when_no_mark_came():
    """A process gone before it reported a mark hands over every arrival it had (from #0): its mark counts as 0."""
    sharing = Sharing(DueTimes.of_process(10.0, "constant", 1.0, seed=1), ["a", "b"])
    switch, gone = sharing.reassign(["a"], {"a"}, 2.95)
    assert (switch, gone) == (30, [("b", 0)]) and set(owners(sharing.assignment, 60)) == {"a"}


def test_cursor_walks_its_own_arrivals_and_catches_up_those_handed_over():
    """A process's walk: its own arrivals in order; after a new assignment gives it arrivals it had walked past,
    those first (earliest first); an arrival put back comes again; `low_water` is the first not handed out."""
    due = DueTimes.of_process(10.0, "constant", 1.0, seed=1, limit=20)
    old = Assignment.of(["a", "b"])
    cursor = Cursor()
    assert [cursor.next_index(due, old, "a") for _ in range(3)] == [0, 2, 4]
    assert cursor.low_water == 5
    cursor.hold(6)
    assert cursor.low_water == 5  # 5 is b's, but the walk has not passed it
    assert cursor.next_index(due, old, "a") == 6 and cursor.low_water == 6  # held: not handed out yet
    cursor.release(6)
    assert cursor.low_water == 7
    new = old.without("b", 0, ["a"])  # b left before sending anything: a sends all of it
    cursor.reassigned(old, new, "a")
    assert [cursor.next_index(due, new, "a") for _ in range(4)] == [1, 3, 5, 7]  # caught up, then its walk
    cursor.put_back(3)  # its user stopped before sending it
    assert cursor.low_water == 3 and cursor.next_index(due, new, "a") == 3
    assert [cursor.next_index(due, new, "a") for _ in range(13)] == [*range(8, 20), None]  # the sequence's end
    cursor.restart()
    assert cursor.low_water == 0 and cursor.next_index(due, old, "b") == 1


def test_a_cursor_is_exhausted_once_it_walked_past_the_end_with_nothing_held_or_to_catch_up():
    due = DueTimes.of_process(10.0, "constant", 1.0, seed=1, limit=4)
    assignment = Assignment.of(["a", "b"])
    cursor = Cursor()
    assert [cursor.next_index(due, assignment, "a") for _ in range(2)] == [0, 2]
    assert not cursor.exhausted(due)  # arrival 3 is b's, but the walk has not passed it
    cursor.hold(2)
    assert cursor.next_index(due, assignment, "a") is None and not cursor.exhausted(due)  # 2 held: not sent yet
    cursor.release(2)
    assert cursor.exhausted(due)
    cursor.put_back(2)  # its user stopped before sending it
    assert not cursor.exhausted(due) and cursor.next_index(due, assignment, "a") == 2
    assert cursor.exhausted(due)
    assert not Cursor().exhausted(DueTimes.of_process(10.0, "constant", 1.0, seed=1))  # an endless sequence


def test_cursor_of_a_process_left_out_stops_at_the_last_epoch():
    """A process that is no member of the last epoch stops walking there: none of the arrivals after it is its."""
    due = DueTimes.of_process(10.0, "constant", 1.0, seed=1)  # endless
    assignment = Assignment.of(["a", "b"]).then(10, ["b"])
    cursor = Cursor()
    assert [cursor.next_index(due, assignment, "a") for _ in range(6)] == [0, 2, 4, 6, 8, None]
    assert cursor.low_water == 10
