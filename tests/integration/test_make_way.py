"""An open loop's sends come first on a process's one event loop (`runtime.pacer`, `load.due_sends`): an arrival is in
the process's due sends from the moment a user takes it until its request leaves, and work that is not a send starts
in a gap between them (`make_way`, `Periodic`); a request waits for its due time at the last moment, once Locust's
session has assembled it (`patches.before_checkout`). Real pacer, real gevent, a real session on loopback; bounds
generous for a busy machine."""

from __future__ import annotations

from time import perf_counter

import gevent
import pytest
from harness.sse_server import HEADERS, chunk, read_request, serve
from locust.contrib.fasthttp import FastHttpSession
from locust.event import Events

from llm_locust.load.due_sends import STALE_S, DueSends
from llm_locust.load.pacing import Plan
from llm_locust.load.sequence import Assignment
from llm_locust.runtime.pacer import Pacer, Periodic, left, make_way, wait_until
from llm_locust.transport import patches

pytestmark = pytest.mark.alone  # an open loop's send times, to the millisecond


def _sender(sends: DueSends, due_s: float, log: list[tuple[str, float]]) -> gevent.Greenlet:
    """A user that sends at `due_s` (and says so in `log`)."""
    handle = sends.add(due_s)

    def send() -> None:
        wait_until(due_s)
        log.append(("sent", perf_counter()))
        left(sends, handle)

    return gevent.spawn(send)


def test_work_waits_for_a_send_due_before_it_would_end():
    sends, log = DueSends(), []
    due_s = perf_counter() + 0.003
    user = _sender(sends, due_s, log)
    make_way(0.005, perf_counter() + 1.0, sends)
    log.append(("work", perf_counter()))
    user.join(timeout=5)
    assert [what for what, _ in log] == ["sent", "work"]
    assert log[0][1] >= due_s
    assert len(sends) == 0


def test_work_that_ends_before_the_next_send_starts_at_once():
    sends = DueSends()
    sends.add(perf_counter() + 1.0)
    t_start_s = perf_counter()
    make_way(0.005, t_start_s + 1.0, sends)
    assert perf_counter() - t_start_s < 0.1  # no wait: 1 s apart


def test_a_closed_loop_never_waits():
    t_start_s = perf_counter()
    make_way(1.0, t_start_s + 10.0, DueSends())
    assert perf_counter() - t_start_s < 0.1


def test_a_send_that_never_leaves_holds_work_back_only_until_it_is_stale():
    sends = DueSends()
    due_s = perf_counter() + 0.002
    sends.add(due_s)  # its request failed to build: its user never sends
    make_way(0.005, perf_counter() + 5.0, sends)
    assert due_s + STALE_S * 0.9 <= perf_counter() < due_s + 1.0


def test_a_periodic_job_runs_in_a_gap_as_long_as_its_last_run():
    sends, log = DueSends(), []
    periodic = Periodic(sends)
    periodic.run(lambda: gevent.sleep(0.004))  # its first run: at once
    assert periodic.cost_s >= 0.004
    user = _sender(sends, perf_counter() + 0.002, log)
    periodic.run(lambda: log.append(("work", perf_counter())))
    user.join(timeout=5)
    assert [what for what, _ in log] == ["sent", "work"]


def test_a_pacers_users_hold_their_arrivals_in_the_due_sends_until_they_leave():
    """Three users take the three arrivals of a trace (due 50, 70, 90 ms from now): all three are in the due sends
    while the users wait; each leaves on time, and leaves the due sends."""
    sends = DueSends()
    due_s = (0.0, 0.02, 0.04)
    pacer = Pacer(due_s, sends=sends)
    pacer.use_trace(due_s, open_loop=True)
    origin_s = perf_counter() + 0.05
    pacer.apply(Plan(arrival="trace", origin_epoch_s=pacer.clock.now_s() + 0.05, limit=3,
                     assignment=Assignment.of(["local"]), me="local"))  # fmt: skip
    sent: list[tuple[float, float]] = []

    def user() -> None:
        ticket = pacer.take()
        pacer.until_due(ticket)
        sent.append((perf_counter(), ticket.t_sched))

    users = [gevent.spawn(user) for _ in due_s]
    gevent.sleep(0.01)
    assert len(sends) == 3
    gevent.joinall(users, timeout=5)
    assert len(sent) == 3 and len(sends) == 0
    for t_sent_s, t_sched in sorted(sent):
        assert t_sent_s >= t_sched
    assert abs(min(t for _, t in sent) - origin_s) < 0.005


def test_a_pacer_is_done_when_its_quota_is_used_or_its_arrivals_all_sent():
    """Closed loop: done once its quota of tickets is out (a ticket given back is owed again); open loop: once the
    last arrival of the sequence was sent, not while a user still waits for it; never under a plan without an end."""
    pacer = Pacer()
    assert not pacer.done  # no quota: a run without --max-requests
    pacer.apply(Plan(quota=2))
    tickets = [pacer.take(), pacer.take()]
    assert pacer.done and all(ticket.t_sched is None for ticket in tickets)
    pacer.sent -= 1  # as `_give_back` does for a ticket that was not sent
    assert not pacer.done

    due_s = (0.0, 0.01)
    pacer = Pacer(due_s)
    pacer.use_trace(due_s, open_loop=True)
    pacer.apply(Plan(arrival="trace", origin_epoch_s=pacer.clock.now_s() + 0.02, limit=2,
                     assignment=Assignment.of(["local"]), me="local"))  # fmt: skip
    assert not pacer.done
    first = gevent.spawn(pacer.take)
    second = gevent.spawn(pacer.take)
    gevent.sleep(0.005)
    assert not pacer.done  # both arrivals held by waiting users
    tickets = [user.value for user in gevent.joinall([first, second], timeout=5)]
    assert len(tickets) == 2 and not pacer.done  # handed out, not sent yet
    pacer.until_due(tickets[0])
    assert not pacer.done
    pacer.until_due(tickets[1])
    assert pacer.done


def test_a_user_stopped_while_it_holds_an_arrival_takes_it_out_of_the_due_sends():
    sends = DueSends()
    pacer = Pacer((0.0,), sends=sends)
    pacer.use_trace((0.0,), open_loop=True)
    pacer.apply(Plan(arrival="trace", origin_epoch_s=pacer.clock.now_s() + 1.0, limit=1,
                     assignment=Assignment.of(["local"]), me="local"))  # fmt: skip
    user = gevent.spawn(pacer.take)
    gevent.sleep(0.01)
    assert len(sends) == 1
    user.kill()
    assert len(sends) == 0
    assert pacer.low_water == 0  # the arrival is back for another user


def test_a_user_stopped_while_its_build_waits_for_a_gap_gives_its_arrival_back():
    """A user took its ticket (its arrival due in 9 ms) and waits for a gap before building (another user's send is
    due within the build's time): stopped there, it puts the arrival back for another user and out of the due
    sends — nothing is lost."""
    sends = DueSends()
    pacer = Pacer((0.0,), sends=sends)
    pacer.use_trace((0.0,), open_loop=True)
    pacer.apply(Plan(arrival="trace", origin_epoch_s=pacer.clock.now_s() + 0.009, limit=1,
                     assignment=Assignment.of(["local"]), me="local"))  # fmt: skip
    sends.add(perf_counter() + 0.0002)  # another user's send, due now
    user = gevent.spawn(pacer.take)
    gevent.sleep(0)  # the user takes its ticket and waits (no other yield on its way)
    assert pacer.sent == 1 and len(sends) == 2
    user.kill()
    assert pacer.sent == 0 and pacer.low_water == 0
    assert len(sends) == 1  # the other user's only


def _answer(sock, _address) -> None:
    """A whole SSE answer per request, keep-alive."""
    while read_request(sock):
        sock.sendall(HEADERS + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


def test_a_request_waits_for_its_due_time_once_assembled_right_before_it_takes_a_connection():
    """The fast client's last moment (`patches.before_checkout`): Locust's session has built the request, no
    connection is taken yet; the hook runs once per request, and what it waits for delays the write."""
    patches.install()
    server = serve(_answer)
    try:
        session = FastHttpSession(f"http://127.0.0.1:{server.server_port}", Events().request, None)
        seen: list[object] = []
        wait_s = 0.02

        def hook() -> None:
            seen.append(patches.take_checked_out())  # none yet: the connection is taken after the hook
            gevent.sleep(wait_s)

        for _ in range(2):  # the second on the first's connection
            t_start_s = perf_counter()
            with patches.before_checkout(hook):
                response = session.post("/v1/chat/completions", data=b"{}", catch_response=True)
            connection = patches.take_checked_out()
            assert response.status_code == 200 and connection is not None
            assert connection.t_sent_s - t_start_s >= wait_s  # written after the wait
        assert seen == [None, None]
        session.post("/v1/chat/completions", data=b"{}", catch_response=True)  # no hook: none called
        assert len(seen) == 2
    finally:
        server.stop(timeout=0)
