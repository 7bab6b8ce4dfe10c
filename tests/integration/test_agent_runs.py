"""Agent sessions against the simulator's tool calls: every session's steps in the simulator's trace in order, each
later step carrying every earlier tool call and its result; the client's tool calls, sessions and per-step TTFT equal
to the trace's; malformed tool-call arguments counted as their own failure kind — through master + 2 workers (chat),
and for each API's own tool-call form (chat, Responses, Messages) in one process."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import gevent
import pytest
from conftest import ROOT, options, read_summary, run_local, run_locust

from llm_locust.report.build import build_report
from llm_locust.runtime.users import ChatAgentUser, MessagesAgentUser, ResponsesAgentUser
from llm_locust.sim import run_sim

AGENT_LOCUSTFILE = ROOT / "locustfiles" / "agent.py"
TTFT_MS, ITL_MS = 30, 2
MAX_STEPS = 4
SESSIONS = 24


class ChatAgent(ChatAgentUser):
    """The chat agent as locustfiles/agent.py defines it."""


class ResponsesAgent(ResponsesAgentUser):
    """A Responses agent."""


class MessagesAgent(MessagesAgentUser):
    """A Messages agent."""


AGENTS = {"chat": ChatAgent, "responses": ResponsesAgent, "messages": MessagesAgent}
AGENT_ARGS = ("--tools", "4", "--tool-latency-ms", "20", "--tool-result-tokens", "uniform:20,40",
              "--max-agent-steps", str(MAX_STEPS), "--max-tokens", "256", "--prompt-tokens", "32",
              "--session-header", "X-Session-Id", "--seed", "11")  # fmt: skip


def sim_args(malformed: float = 0.0) -> tuple[str, ...]:
    return ("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", "16", "--tool-call-rate", "0.6",
            "--tool-call-malformed-rate", str(malformed), "--session-header", "X-Session-Id")  # fmt: skip


def sessions_of(trace: list[dict]) -> dict[str, list[dict]]:
    """The trace's requests by session, each session's in the order the simulator received them."""
    sessions: dict[str, list[dict]] = defaultdict(list)
    for record in sorted(trace, key=lambda r: r["t_recv"]):
        sessions[record["session"]].append(record)
    return sessions


def check_sessions(sessions: dict[str, list[dict]]) -> None:
    """Each session: at most MAX_STEPS steps; every step but the first follows a tool call, and carries every earlier
    call of its session and a result for each (the ids the simulator gave them); only a session's last step may
    end without a tool call."""
    for session, steps in sessions.items():
        assert 1 <= len(steps) <= MAX_STEPS, session
        called: list[str] = []
        for number, step in enumerate(steps, 1):
            assert step["carried_tool_calls"] == called, (session, number)
            assert step["carried_tool_results"] == called, (session, number)
            if number < len(steps):
                assert step["tool_call"] is not None and not step["tool_call"]["malformed"], (session, number)
                assert steps[number]["t_recv"] > step["t_done"], (session, number)  # one step after the other
                called.append(step["tool_call"]["id"])


def served_ttfts_ms(trace: list[dict]) -> list[float]:
    return sorted((r["token_times"][0] - r["t_recv"]) * 1e3 for r in trace)


def assert_ttft_matches(stats: dict, served_ms: list[float], median_ms: float = 1.0) -> None:
    """The client's latency distribution (TTFT, time to tool call) as the simulator served it: the median within
    `median_ms`; not below what was served (the client's also holds the request's way to the server; the server stamps
    a write once the call returned, the loopback delivered it within the call), the p90 within 25 ms (a loaded
    machine's scheduling delays before the send land there)."""
    n = len(served_ms)
    assert stats["count"] == n
    assert abs(stats["p50"] - served_ms[(n - 1) // 2]) < median_ms, (stats["p50"], served_ms[(n - 1) // 2])
    assert stats["min"] > served_ms[0] - 1.0 and abs(stats["p90"] - served_ms[-(-9 * n // 10) - 1]) < 25.0


@pytest.mark.alone  # TTFT p50 within 1 ms of the trace
def test_agent_sessions_through_master_and_two_workers(tmp_path: Path):
    """Ended by --max-sessions (each worker starts its share; the run ends once the master counted them all ended):
    every request the simulator answered is in the workers' reports by then, none in flight."""
    with run_sim(*sim_args()) as sim:
        result = run_locust(AGENT_LOCUSTFILE, "--host", sim.url, *AGENT_ARGS, "--processes", "2", "-u", "4",
                            "-r", "4", "--max-sessions", str(SESSIONS), "--run-time", "60s", "--stop-timeout", "2",
                            "--results-dir", str(tmp_path / "r"))  # fmt: skip
        trace = sim.trace()
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(tmp_path / "r")
    assert summary["run"]["workers_max"] == 2 and summary["failures"] == {}
    assert summary["run"]["stop_reason"] == f"--max-sessions {SESSIONS} reached"
    assert summary["throughput"]["requests_ok"] == len(trace) >= SESSIONS, result.stderr[-3000:]
    sessions = sessions_of(trace)
    assert None not in sessions
    check_sessions(sessions)
    assert any(len(steps) > 1 for steps in sessions.values())
    agent = summary["agent"]
    assert agent["tool_calls"] == sum(1 for r in trace if r["tool_call"]) > 0
    for steps in sessions.values():  # every session ended: an answer without a tool call, or its last step
        assert steps[-1]["tool_call"] is None or len(steps) == MAX_STEPS
    # each process starts its share of the sessions (a share handed out again as users arrive may add one)
    assert SESSIONS <= agent["sessions"] == len(sessions) <= SESSIONS + 2
    assert agent["sessions_failed"] == 0
    # the whole history went back: each step's prompt, as the client counted it, is the simulator's count
    tokens = summary["tokens"]
    assert tokens["prompt_tokens_checked"] == len(trace) and tokens["prompt_token_mismatches"] == 0
    m = summary["metrics"]
    assert m["agent_steps"]["count"] == agent["sessions"] and 1 <= m["agent_steps"]["max"] <= MAX_STEPS
    assert m["tool_call_ms"]["count"] == agent["tool_calls"]
    for name in ("agent_session_ms", "agent_model_ms", "agent_tool_ms"):
        assert m[name]["count"] == agent["sessions"], name
    # a session's duration is its model time and its tool time; the tools waited 20 ms per step that called them
    assert m["agent_session_ms"]["mean"] == pytest.approx(m["agent_model_ms"]["mean"] + m["agent_tool_ms"]["mean"],
                                                          rel=0.01)  # fmt: skip
    assert m["agent_tool_ms"]["max"] >= 20 and m["agent_model_ms"]["min"] >= TTFT_MS
    # per step: TTFT as the simulator served it, overall and at each step; the time to the complete tool call as
    # the simulator sent the call's last piece
    assert_ttft_matches(m["ttft_ms"], served_ttfts_ms(trace))
    served_calls_ms = sorted((r["token_times"][-1] - r["t_recv"]) * 1e3 for r in trace if r["tool_call"])
    assert_ttft_matches(m["tool_call_ms"], served_calls_ms, median_ms=2.0)
    by_step = {row["label"]: row for row in summary["breakdowns"]["agent_step"]}
    step_of = {id(step): number for steps in sessions.values() for number, step in enumerate(steps, 1)}
    for label, numbers in (("1", {1}), ("2", {2}), ("3-4", {3, 4})):
        served = [r for r in trace if step_of[id(r)] in numbers]
        if served:
            assert by_step[label]["requests_ok"] == len(served), label
            assert_ttft_matches(by_step[label]["metrics"]["ttft_ms"], served_ttfts_ms(served))
    page = build_report([tmp_path / "r"], tmp_path / "report.html", png=False).html_path.read_text()
    assert "Agent sessions" in page and "model share" in page and "by agent_step" in page


@pytest.mark.alone  # tool calls of a 3 s run
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_each_apis_tool_calls_go_back_and_malformed_ones_fail(api: str, tmp_path: Path):
    with run_sim(*sim_args(malformed=0.3)) as sim:
        opts = options("--host", sim.url, *AGENT_ARGS, "--results-dir", str(tmp_path))
        run_local(opts, 3, 3, user_classes=[AGENTS[api]], stop_timeout_s=10)
        gevent.sleep(0.3)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    malformed = sum(1 for r in trace if r["tool_call"] and r["tool_call"]["malformed"])
    calls = sum(1 for r in trace if r["tool_call"] and not r["tool_call"]["malformed"])
    assert malformed > 0 and calls > 0 and len(trace) >= 10
    assert summary["failures"] == {"tool_call_json": malformed}
    assert summary["throughput"]["requests_ok"] == len(trace) - malformed
    assert summary["agent"]["tool_calls"] == calls and summary["agent"]["sessions_failed"] == malformed
    sessions = sessions_of(trace)
    for steps in sessions.values():  # a malformed call ends its session
        assert all(not (s["tool_call"] and s["tool_call"]["malformed"]) for s in steps[:-1])
    check_sessions(sessions)


def test_max_sessions_ends_the_run_after_exactly_that_many_sessions(tmp_path: Path):
    """Closed loop: each process starts its share of --max-sessions sessions (later steps of a session still go),
    and the run ends once they all ended."""
    with run_sim(*sim_args()) as sim:
        opts = options("--host", sim.url, *AGENT_ARGS, "--max-sessions", "5", "--results-dir", str(tmp_path))
        run_local(opts, 3, 4, user_classes=[ChatAgent], stop_timeout_s=10)
        gevent.sleep(0.3)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    assert summary["run"]["stop_reason"] == "--max-sessions 5 reached"
    assert summary["agent"]["sessions"] == 5 == len(sessions_of(trace))
    assert summary["throughput"]["requests_ok"] == len(trace)


def test_tools_from_a_bfcl_file(tmp_path: Path):
    """Each session carries one BFCL entry's functions (types made JSON Schema's, dots in names `_`); the simulator
    calls them by those names."""
    entries = [
        {"id": "simple_0", "question": [[{"role": "user", "content": "Area of a triangle, base 10, height 5?"}]],
         "function": [{"name": "geometry.triangle_area", "description": "Area of a triangle.", "parameters": {
             "type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "float"}},
             "required": ["base", "height"]}}]},
        {"id": "multiple_0", "question": [[{"role": "user", "content": "Factorial of 5, then its square root?"}]],
         "function": [{"name": "math.factorial", "description": "n!", "parameters": {
             "type": "dict", "properties": {"number": {"type": "integer"}}, "required": ["number"]}},
                      {"name": "math.sqrt", "description": "Square root.", "parameters": {
             "type": "dict", "properties": {"x": {"type": "float"}}, "required": ["x"]}}]},
    ]  # fmt: skip
    path = tmp_path / "BFCL_v3_sample.json"
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n")
    args = list(AGENT_ARGS)
    args[args.index("--tools") : args.index("--tools") + 2] = ["--tools-file", str(path)]
    with run_sim(*sim_args()) as sim:
        opts = options("--host", sim.url, *args, "--results-dir", str(tmp_path / "r"))
        run_local(opts, 2, 2, user_classes=[ChatAgent], stop_timeout_s=10)
        gevent.sleep(0.3)
        trace = sim.trace()
    summary = read_summary(tmp_path / "r")
    assert summary["failures"] == {} and summary["agent"]["tool_calls"] > 0
    names = {"geometry_triangle_area", "math_factorial", "math_sqrt"}
    assert {r["tool_call"]["name"] for r in trace if r["tool_call"]} <= names
    assert {r["tools"] for r in trace} <= {1, 2}
    for steps in sessions_of(trace).values():  # a session keeps its tool set
        assert len({s["tools"] for s in steps}) == 1


def test_agent_sessions_with_the_openai_sdk_client(tmp_path: Path):
    """The openai SDK's chunks (`--client openai-sdk`) give the same tool calls, sent back the same way."""
    with run_sim(*sim_args()) as sim:
        opts = options("--host", sim.url, *AGENT_ARGS, "--client", "openai-sdk", "--model", "llm-locust-sim",
                       "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, 2, 3, user_classes=[ChatAgent], stop_timeout_s=10)
        gevent.sleep(0.3)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] == len(trace) >= 6
    assert summary["agent"]["tool_calls"] == sum(1 for r in trace if r["tool_call"]) > 0
    check_sessions(sessions_of(trace))
