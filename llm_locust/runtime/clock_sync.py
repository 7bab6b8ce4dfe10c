"""A worker's clock offset from its master, measured by round trips over Locust's message channel (`load.clock`
says how and decides).

The worker sends `PING_MESSAGE` with its wall clock; the master answers at once with `PONG_MESSAGE`, the worker's
reading echoed and its own; the worker, hearing it, reads its clock again and keeps the best of its recent round
trips as its `RunClock`'s offset. `START_PINGS` pings go as the worker starts (an open-loop plan, whose origin is an
epoch second of the master's, waits for their answers, and its origin follows each later estimate:
`UsersPart.clock_measured`), then `PINGS` every report interval, `PING_GAP_S` apart: a few small messages each way
per worker and interval. The worker reports its offset to the master with every stats report
(`runner_ops.CLOCK_KEY`); the master lists them in summary.json (`clocks`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gevent
from locust.exception import RPCError
from locust.runners import WORKER_REPORT_INTERVAL

from llm_locust.load.clock import OffsetEstimator, RunClock

PING_MESSAGE = "llm_locust_clock_ping"
"""Worker → master: {"t_send_s": the worker's wall clock as it sends}."""
PONG_MESSAGE = "llm_locust_clock_pong"
"""Master → worker: {"t_send_s": the ping's, echoed; "t_master_s": the master's wall clock as it answers}."""
START_PINGS = 5
"""Pings as the worker starts."""
PINGS = 3
"""Pings every report interval after that."""
PING_GAP_S = 0.01
"""Between two pings of a burst (their answers are not waited for: each carries its own send time)."""


def answer_pings(runner: Any) -> None:
    """Master: answer each worker's ping with this process's wall clock."""

    def answer(environment: Any, msg: Any, **_: Any) -> None:
        data = {"t_send_s": msg.data["t_send_s"], "t_master_s": time.time()}
        runner.send_message(PONG_MESSAGE, data, client_id=msg.node_id)

    runner.register_message(PING_MESSAGE, answer)


def ping_master(runner: Any, clock: RunClock, measured: Callable[[], None]) -> None:
    """Worker: measure `clock`'s offset from the master of `runner` now and every report interval, for as long as the
    runner runs; call `measured` after each answer once `START_PINGS` are in (the start's burst, or later ones if some
    of its pings were lost)."""
    estimator = OffsetEstimator()
    answers = 0

    def answered(environment: Any, msg: Any, **_: Any) -> None:
        nonlocal answers
        clock.offset = estimator.add(msg.data["t_send_s"], time.time(), msg.data["t_master_s"])
        answers += 1
        if answers >= START_PINGS:
            measured()

    runner.register_message(PONG_MESSAGE, answered)
    runner.greenlet.spawn(_ping_forever, runner)


def _ping_forever(runner: Any) -> None:
    """`START_PINGS` pings, then `PINGS` every report interval (a lost connection: the next burst tries again)."""
    burst = START_PINGS
    while True:
        for _ in range(burst):
            try:
                runner.send_message(PING_MESSAGE, {"t_send_s": time.time()})
            except RPCError:
                break
            gevent.sleep(PING_GAP_S)
        burst = PINGS
        gevent.sleep(WORKER_REPORT_INTERVAL)
