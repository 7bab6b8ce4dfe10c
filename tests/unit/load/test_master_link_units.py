"""When an orphaned worker stops (load/master_link.py): a closed connection that stays closed, or a long silence;
never a brief reconnect, a late answer, or the worker's own stall."""

from __future__ import annotations

from llm_locust.load.master_link import CLOSED_GRACE_S, SILENCE_S, MasterLink


def checked(link: MasterLink, start_s: float, end_s: float, step_s: float = 0.5) -> list[tuple[float, str | None]]:
    """`link.gone` every `step_s` from `start_s` to `end_s` (as the worker's watch checks it)."""
    out = []
    t = start_s
    while t <= end_s + 1e-9:
        out.append((t, link.gone(t)))
        t += step_s
    return out


def first_gone(link: MasterLink, start_s: float, end_s: float) -> tuple[float, str] | None:
    return next(((t, why) for t, why in checked(link, start_s, end_s) if why is not None), None)


def test_a_closed_connection_that_stays_closed_is_a_gone_master_after_the_grace():
    link = MasterLink()
    link.heard(0.0)
    link.gone(0.5)
    link.closed(1.0)
    t, why = first_gone(link, 1.0, 10.0)
    assert t == 1.0 + CLOSED_GRACE_S
    assert why == f"its connection closed {CLOSED_GRACE_S:.1f} s ago and did not come back"


def test_a_connection_that_comes_back_or_an_answer_is_no_gone_master():
    link = MasterLink()
    link.heard(0.0)
    link.closed(1.0)
    assert link.gone(1.5) is None
    link.opened()  # ZeroMQ reconnected
    assert first_gone(link, 2.0, 9.5) is None
    link.closed(10.0)
    link.heard(10.5)  # an answer arrived: the connection is there
    assert first_gone(link, 10.5, 19.0) is None


def test_silence_counts_only_after_its_limit_and_late_answers_are_no_gone_master():
    link = MasterLink()
    for t in range(0, 30, 3):  # a busy master answering 3 s late
        link.heard(float(t))
        assert first_gone(link, float(t), t + 2.5) is None
    link.heard(30.0)
    t, why = first_gone(link, 30.0, 60.0)
    assert t == 30.0 + SILENCE_S and why == f"no answer to this worker's heartbeats for {SILENCE_S:.1f} s"


def test_a_master_never_heard_is_not_judged():
    link = MasterLink()
    link.closed(0.0)  # a worker started before its master: connection refused, retried
    assert first_gone(link, 0.0, 120.0) is None


def test_a_stall_of_the_worker_restarts_the_clocks():
    link = MasterLink()
    link.heard(0.0)
    link.gone(0.5)
    assert link.gone(20.0) is None  # the worker's loop stalled 19.5 s: unread answers may be waiting
    assert first_gone(link, 20.5, 20.0 + SILENCE_S - 0.5) is None
    assert link.gone(20.0 + SILENCE_S) is not None  # then silence counts from the stall's end
    link = MasterLink()
    link.heard(0.0)
    link.closed(0.2)
    link.gone(0.5)
    assert link.gone(5.0) is None  # stalled with the connection closed: the grace restarts
    assert first_gone(link, 5.5, 10.0) == (
        5.0 + CLOSED_GRACE_S,
        f"its connection closed {CLOSED_GRACE_S:.1f} s ago and did not come back",
    )
