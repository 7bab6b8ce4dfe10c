"""Synthetic multi-turn sessions against the simulator's prefix cache, through master + 2 workers: every later turn
carries the earlier answers word for word as the simulator generated them, the turn breakdown's TTFT falls with the
turn as the history is reused, the client's expected reuse equals the simulator's cache hits on a cold cache, and a
session's turns are never split between processes."""

from __future__ import annotations

import itertools
from collections import defaultdict

import pytest
from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust

from llm_locust.report.build import build_report
from llm_locust.sim import run_sim
from llm_locust.sim.prefix_cache import BLOCK_TOKENS

SIM_TTFT_MS = 150.0  # fixed model: all prefill, cut by the cached share of the prompt
TURN_TOKENS = BLOCK_TOKENS // 2  # a user message and an answer fill one block together
TURNS = 4


@pytest.mark.alone  # exact turn counts against the trace
def test_sessions_send_the_answers_back_reuse_their_history_and_stay_whole(tmp_path):
    """Turn k's prompt is k user messages and k - 1 answers of 256 words: its history fills k - 1 whole blocks, and
    it hits all of them only if every answer came back exactly as generated (a block is named by its text). The
    fixed model's TTFT is 150 ms x the uncached share: 150, 50, 30, 21 ms for turns 1 to 4."""
    sim_args = ("--ttft-ms", str(SIM_TTFT_MS), "--itl-ms", "1", "--prefix-cache-blocks", "100000",
                "--session-header", "X-Session-Id")  # fmt: skip
    with run_sim(*sim_args) as sim:
        result = run_locust(LOCUSTFILE, "--host", sim.url, "--session-turns", str(TURNS), "--think-time-s", "0.05",
                            "--prompt-tokens", str(TURN_TOKENS), "--max-tokens", str(TURN_TOKENS), "--ignore-eos",
                            "--session-header", "X-Session-Id", "--seed", "5", "--processes", "2", "-u", "4",
                            "-r", "4", "--run-time", "5s", "--stop-timeout", "10",
                            "--results-dir", str(tmp_path / "r"))  # fmt: skip
        trace = sim.trace()
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(tmp_path / "r")
    assert summary["run"]["workers_max"] == 2 and summary["failures"] == {}
    # the run time's end stops the users: a turn then in flight is cut on the server and never reported; every other
    # request was counted
    answered = [r for r in trace if r["finish_reason"] is not None]
    assert len(answered) == summary["throughput"]["requests_ok"] >= 12 and len(trace) - len(answered) <= 4
    sessions: dict[str, list[dict]] = defaultdict(list)
    for record in sorted(trace, key=lambda r: r["t_recv"]):
        sessions[record["session"]].append(record)
    assert None not in sessions and len(sessions) >= 4
    for session, records in sessions.items():
        assert len(records) <= TURNS, session
        for turn, record in enumerate(records, 1):
            # the whole history, in order, from one user: turn k carries k user messages and k - 1 full answers ...
            assert record["prompt_tokens"] == (2 * turn - 1) * TURN_TOKENS, session
            # ... and its cached history is every whole block of it: the answers came back word for word
            assert (record["prefix_blocks"], record["prefix_blocks_hit"]) == (turn - 1, turn - 1), session
        for before, after in itertools.pairwise(records):  # one turn at a time: after the previous answer ended
            assert after["t_recv"] > before["token_times"][-1], session
            assert before["completion_tokens"] == TURN_TOKENS
    reuse = summary["prefix_reuse"]
    assert reuse["blocks"] == sum(r["prefix_blocks"] for r in answered)
    assert reuse["blocks_seen"] == sum(r["prefix_blocks_hit"] for r in answered) > 0  # expected = the cold cache's
    assert summary["tokens"]["prompt_token_mismatches"] == 0
    by_turn = {row["label"]: row for row in summary["breakdowns"]["turn"]}
    assert list(by_turn) == ["1", "2", "3-4"]
    assert sum(row["requests_ok"] for row in by_turn.values()) == len(answered)
    ttft_ms = [by_turn[label]["metrics"]["ttft_ms"]["p50"] for label in ("1", "2", "3-4")]
    assert ttft_ms[0] > 100 and ttft_ms[1] < 80 and ttft_ms[0] > ttft_ms[1] > ttft_ms[2], ttft_ms
    page = build_report([tmp_path / "r"], tmp_path / "report.html", png=False).html_path.read_text()
    assert "by turn" in page and "3-4" in page


@pytest.mark.parametrize("client", ["fast", "openai-sdk"])
def test_both_clients_send_the_answer_back(tmp_path, client):
    """The fast client and the openai SDK both keep the answer's text for the next turn: turn 2 carries turn 1's
    prompt and its 212-word answer word for word (the whole block they make hits the cache)."""
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--prefix-cache-blocks", "1000") as sim:
        opts = options("--host", sim.url, "--client", client, "--session-turns", "2", "--prompt-tokens", "300",
                       "--max-tokens", "212", "--ignore-eos", "--seed", "6", "--max-requests", "4",
                       "--results-dir", str(tmp_path))  # fmt: skip
        # two sessions of two turns: the run ends on its count, not on a clock (a loaded machine makes it longer,
        # never shorter of turns; 30 s is only how long to wait)
        run_local(opts, users=1, seconds=30, stop_timeout_s=5, until_stopped=True)
        trace = sorted(sim.trace(), key=lambda r: r["t_recv"])
    assert len(trace) >= 2 and read_summary(tmp_path)["failures"] == {}
    for first, second in zip(trace[::2], trace[1::2], strict=False):  # 300 + 212 words: one whole block, cached
        assert (first["prompt_tokens"], second["prompt_tokens"]) == (300, 812)
        assert (second["prefix_blocks"], second["prefix_blocks_hit"]) == (1, 1)


def test_in_open_loop_every_turn_takes_a_ticket(tmp_path):
    """--request-rate with sessions: the rate is the rate of requests, turns included; a session's turns still go
    one after the other from one user, each after the previous answer and the think time."""
    rate_per_s, seconds = 10, 4
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--session-header", "X-Session-Id") as sim:
        opts = options("--host", sim.url, "--request-rate", str(rate_per_s), "--arrival", "constant",
                       "--session-turns", "3", "--think-time-s", "0.1", "--prompt-tokens", "20", "--max-tokens", "4",
                       "--session-header", "X-Session-Id", "--seed", "4",
                       "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=8, seconds=seconds, stop_timeout_s=5)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    assert summary["failures"] == {} and len(trace) == summary["throughput"]["requests_ok"]
    # every turn is one arrival (were only first turns arrivals, ~3x as many); users still take due tickets while
    # they stop, up to 2 s more
    assert 0.6 * rate_per_s * seconds <= len(trace) <= rate_per_s * (seconds + 2)
    sessions: dict[str, list[dict]] = defaultdict(list)
    for record in sorted(trace, key=lambda r: r["t_recv"]):
        sessions[record["session"]].append(record)
    assert max(map(len, sessions.values())) == 3
    for session, records in sessions.items():
        assert [r["prompt_tokens"] for r in records] == [20, 44, 68][: len(records)], session  # + 4-token answers
        for before, after in itertools.pairwise(records):
            assert after["t_recv"] - before["token_times"][-1] >= 0.1, session  # the answer, then the think time
