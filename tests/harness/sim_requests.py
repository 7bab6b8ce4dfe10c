"""Requests to the simulator over a plain socket and what its trace recorded of them."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from typing import Any

from llm_locust.sim import SimProcess


def chat(max_tokens: int | None = None, stream: bool = True, **extra: Any) -> dict[str, Any]:
    """A chat-completions request body for the simulator's model (`extra`: more fields)."""
    body: dict[str, Any] = {
        "model": "llm-locust-sim",
        "messages": [{"role": "user", "content": "one two three four five"}],
        "stream": stream,
        "stream_options": {"include_usage": True},
        **extra,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def trace_record(sim: SimProcess, response_id: str) -> dict[str, Any]:
    """The one record of `sim`'s trace for the response `response_id`."""
    (record,) = [r for r in sim.trace() if r["id"] == response_id]
    return record


def assert_t_recv_is_the_kernel_arrival(sim: SimProcess, conn: http.client.HTTPConnection) -> None:
    """Send two requests on `conn` while `sim` is stopped (SIGSTOP, standing for a loop busy
    writing other streams), the second left unread for 0.3 s: its trace t_recv must be the
    kernel's arrival time, before the process could read it, so that the simulator's TTFT
    (first write − t_recv) includes that wait."""
    body = json.dumps(chat(max_tokens=2, ignore_eos=True))
    ids = []
    for stop_s in (0.0, 0.3):  # the first request opens a plain connection (its socket: timestamps on)
        os.kill(sim.pid, signal.SIGSTOP)
        try:
            t_send = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", body=body)
            time.sleep(stop_s)
        finally:
            os.kill(sim.pid, signal.SIGCONT)
        response = conn.getresponse()
        ids.append((json.loads(response.readline()[6:])["id"], t_send))
        response.read()
    conn.close()
    response_id, t_send = ids[1]
    record = trace_record(sim, response_id)
    assert 0 <= record["t_recv"] - t_send < 0.1  # arrived at once, read 0.3 s later
    assert record["token_times"][0] - record["t_recv"] >= 0.3  # the wait is in the server's TTFT
