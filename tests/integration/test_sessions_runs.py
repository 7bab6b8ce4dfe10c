"""Synthetic multi-turn sessions against the simulator's prefix cache, through master + 2 workers: every later turn
carries the earlier answers word for word as the simulator generated them, the turn breakdown's TTFT falls with the
turn as the history is reused, the client's expected reuse equals the simulator's cache hits on a cold cache, and a
session's turns are never split between processes."""

from __future__ import annotations

import itertools
from collections import defaultdict

from conftest import LOCUSTFILE, read_summary, run_locust

from llm_locust.sim import run_sim
from llm_locust.sim.prefix_cache import BLOCK_TOKENS

SIM_TTFT_MS = 150.0  # fixed model: all prefill, cut by the cached share of the prompt
TURN_TOKENS = BLOCK_TOKENS // 2  # a user message and an answer fill one block together
TURNS = 4


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
    assert len(trace) == summary["throughput"]["requests_ok"] >= 12
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
    assert reuse["blocks"] == sum(r["prefix_blocks"] for r in trace)
    assert reuse["blocks_seen"] == sum(r["prefix_blocks_hit"] for r in trace) > 0  # expected = the cold cache's
    assert summary["tokens"]["prompt_token_mismatches"] == 0
    by_turn = {row["label"]: row for row in summary["breakdowns"]["turn"]}
    assert list(by_turn) == ["1", "2", "3-4"]
    assert sum(row["requests_ok"] for row in by_turn.values()) == len(trace)
    ttft_ms = [by_turn[label]["metrics"]["ttft_ms"]["p50"] for label in ("1", "2", "3-4")]
    assert ttft_ms[0] > 100 and ttft_ms[1] < 80 and ttft_ms[0] > ttft_ms[1] > ttft_ms[2], ttft_ms
