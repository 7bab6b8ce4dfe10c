"""The simulator's tool calls measured by llm-locust's own chat, Responses and Messages users (the tools sent with
--extra-body): every streamed argument piece is a token event, timed and counted as the trace wrote it."""

from __future__ import annotations

import json
import statistics
from itertools import pairwise

import gevent
import pytest
from conftest import ChatUser, options, read_summary, run_local

from llm_locust.runtime.users import MessagesUser, ResponsesUser
from llm_locust.sim import run_sim

TTFT_MS, ITL_MS = 60, 8
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
TOOLS = {
    "chat": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
    "responses": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
    "messages": [{"name": "get_weather", "input_schema": SCHEMA}],
}


class ResponsesApiUser(ResponsesUser):
    """The Responses user as locustfiles/responses.py defines it."""


class MessagesApiUser(MessagesUser):
    """The Messages user as locustfiles/messages.py defines it."""


USERS = {"chat": ChatUser, "responses": ResponsesApiUser, "messages": MessagesApiUser}


@pytest.fixture(scope="module")
def sim():
    """Fixed timing; every request offering tools is answered with a tool call."""
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--tool-call-rate", "1") as sim:
        yield sim


@pytest.mark.alone  # p50s against the trace
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_client_measures_tool_call_streams_as_the_trace_wrote_them(sim, api, tmp_path):
    sim.reset()
    opts = options("--host", sim.url, "--max-tokens", "64", "--results-dir", str(tmp_path), "--interval-s", "1",
                   "--prompt-tokens", "16", "--extra-body", json.dumps({"tools": TOOLS[api]}))  # fmt: skip
    run_local(opts, 2, 2, user_classes=[USERS[api]], stop_timeout_s=10)
    gevent.sleep(0.3)
    summary = read_summary(tmp_path)
    trace = [r for r in sim.trace() if r["endpoint"] == api]
    m, n = summary["metrics"], summary["throughput"]["requests_ok"]
    assert summary["failures"] == {} and n == len(trace) >= 4
    assert all(r["tool_call"] is not None and r["finish_reason"] == "tool_calls" for r in trace)
    # the output tokens are the arguments' pieces, one token event each
    assert summary["throughput"]["output_tokens"] == sum(r["completion_tokens"] for r in trace)
    assert summary["tokens"]["sources"] == {"usage": n} and summary["tokens"]["usage_event_mismatches"] == 0
    assert m["itl_ms"]["count"] == sum(r["completion_tokens"] - 1 for r in trace)
    served_ttft_ms = [(r["token_times"][0] - r["t_recv"]) * 1000 for r in trace]
    served_itl_ms = [(b - a) * 1000 for r in trace for a, b in pairwise(r["token_times"])]
    assert abs(m["ttft_ms"]["p50"] - statistics.median(served_ttft_ms)) < TTFT_MS / 4
    assert abs(m["itl_ms"]["p50"] - statistics.median(served_itl_ms)) < ITL_MS / 2
