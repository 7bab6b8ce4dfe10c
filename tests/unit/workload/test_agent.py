"""Agent sessions, pure parts: a session's steps and figures (`AgentSession.finished`), the answer's text without its
tool calls, each API's history form of a step, the agent's requests built by the workload, `--max-sessions`."""

from __future__ import annotations

import json

import pytest
from conftest import options

from llm_locust.apis import api
from llm_locust.config.settings import Settings
from llm_locust.load.limits import Limits
from llm_locust.metrics.record import AgentSummary, ErrorKind, RequestRecord, ToolCall
from llm_locust.workload.agent import AgentSession, answer_content
from llm_locust.workload.builder import Workload
from llm_locust.workload.sessions import Session

CALL = ToolCall("call_1", "get_weather", '{"location": "Paris"}')


def step(t_send: float, t_done: float, calls: tuple[ToolCall, ...] = (), failed: bool = False) -> RequestRecord:
    record = RequestRecord("chat", t_send=t_send, t_done=t_done, tool_calls=calls)
    if failed:
        record.fail(ErrorKind.TOOL_CALL_JSON, "bad")
    return record


def test_a_session_ends_with_an_answer_without_tool_call_and_carries_its_figures():
    agent = AgentSession(Session("s", 1), max_steps=8)
    first, second, last = step(10.0, 10.5, (CALL, CALL)), step(10.7, 11.0, (CALL,)), step(11.3, 11.4)
    agent.finished(first)
    assert agent.pending == (CALL, CALL) and first.agent is None and first.groups == (("agent_step", "1"),)
    agent.send_back([{"role": "assistant"}, {"role": "tool"}], tokens=30)
    assert agent.ready and agent.pending == () and agent.conversation.history_tokens == 30
    agent.finished(second)
    agent.ready = False
    agent.finished(last)
    assert last.groups == (("agent_step", "3-4"),) and agent.pending == ()
    summary = last.agent
    assert summary is not None and (summary.steps, summary.tool_calls, summary.ok) == (3, 3, True)
    assert summary.duration_s == pytest.approx(1.4) and summary.model_s == pytest.approx(0.9)
    assert summary.tool_s == pytest.approx(0.5) and summary.model_s + summary.tool_s == pytest.approx(1.4)
    assert last.agent_session_s == pytest.approx(1.4) and second.agent_session_s is None


@pytest.mark.parametrize(("records", "steps"), [
    ([step(0.0, 1.0, (CALL,)), step(1.0, 2.0, (CALL,))], 2),  # --max-agent-steps 2
    ([step(0.0, 1.0, (CALL,), failed=True)], 1),  # a failed step ends it
])  # fmt: skip
def test_max_steps_or_a_failed_step_end_the_session(records, steps):
    agent = AgentSession(Session("s", 1), max_steps=2)
    for record in records:
        agent.finished(record)
    summary = records[-1].agent
    assert summary is not None and summary.steps == steps and agent.pending == ()
    assert summary.ok is records[-1].ok


def test_answer_content_leaves_the_tool_calls_text_out():
    chat = RequestRecord(
        "chat", t_send=0.0, answer_text="Let me look." + CALL.name + CALL.arguments, tool_calls=(CALL,)
    )
    assert answer_content(chat) == "Let me look."
    messages = RequestRecord("messages", t_send=0.0, answer_text=CALL.arguments, tool_calls=(CALL,))
    assert answer_content(messages) == ""


def test_each_api_shapes_a_step_in_its_own_form():
    calls, results = (CALL, ToolCall("call_2", "get_time", "")), ["18 C, sunny", "12:00"]
    chat = api("chat").tools.step("", calls, results)
    assert chat[0] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": CALL.arguments}},
        {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}  # fmt: skip
    assert chat[1:] == [{"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
                        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"}]  # fmt: skip
    responses = api("responses").tools.step("Checking.", calls, results)
    assert responses[0] == {"role": "assistant", "content": "Checking."}
    assert responses[1] == {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                            "arguments": CALL.arguments}  # fmt: skip
    assert responses[3:] == [{"type": "function_call_output", "call_id": "call_1", "output": "18 C, sunny"},
                             {"type": "function_call_output", "call_id": "call_2", "output": "12:00"}]  # fmt: skip
    answer, results_message = api("messages").tools.step("Checking.", calls, results)
    assert answer == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"location": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}]}  # fmt: skip
    assert results_message == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "18 C, sunny"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "12:00"}]}  # fmt: skip


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_the_workload_sends_the_history_with_the_calls_and_results_then_starts_anew(endpoint):
    s = Settings.from_options(options("--host", "http://127.0.0.1:1", "--tools", "3", "--tool-result-tokens", "7",
                                      "--tool-latency-ms", "40", "--prompt-tokens", "16", "--seed", "2"))  # fmt: skip
    workload = Workload(s.workload, endpoint, server_family="vllm", agent=True)
    first = workload.next_request("m")
    body = json.loads(first.body)
    assert first.keep_answer and first.turn == 0 and len(body["tools"]) == 3
    record = RequestRecord(endpoint, t_send=1.0, t_done=1.2, answer_text=CALL.arguments, tool_calls=(CALL,))
    workload.answered(record)
    assert workload.think_time_s() == pytest.approx(0.04)  # the tool's latency before the next step
    second = workload.next_request("m")
    body2 = json.loads(second.body)
    assert second.session == first.session and body2["tools"] == body["tools"]
    history = json.dumps(body2)
    assert "call_1" in history and CALL.name in history
    assert second.expected_prompt_tokens == first.expected_prompt_tokens + 7 + 2  # result, and the call's 2 words
    done = RequestRecord(endpoint, t_send=1.3, t_done=1.4, answer_text="It is sunny.")
    workload.answered(done)
    assert isinstance(done.agent, AgentSummary) and done.agent.steps == 2 and workload.think_time_s() == 0
    assert workload.next_request("m").session != first.session  # a new session


def test_max_sessions_stops_the_run():
    limits = Limits(max_sessions=5)
    assert limits.stop_reason(100, 100, {}, sessions=4) is None
    assert limits.stop_reason(100, 100, {}, sessions=5) == "--max-sessions 5 reached"
