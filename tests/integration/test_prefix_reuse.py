"""Prefix reuse end to end: --prefix-pool against the simulator's prefix cache (the client's expected reuse equals
what a cold cache measures; TTFT falls as reuse rises), and sticky multi-turn sessions through master + 3 workers."""

from __future__ import annotations

import itertools
import json
import urllib.request
from collections import defaultdict

from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust

from llm_locust.report.build import build_report
from llm_locust.sim import run_sim
from llm_locust.workload.prefix_blocks import BLOCK_TOKENS

SIM_TTFT_MS = 200.0  # fixed model: all prefill, cut by the cached share


def _sum(records: list[dict], field: str) -> int:
    return sum(r[field] for r in records)


def test_expected_reuse_equals_the_cold_caches_and_ttft_falls_with_reuse(tmp_path):
    """8 prefixes of 1024 tokens before 512 tokens of their own: a request whose prefix was drawn before reuses 2 of
    its 3 blocks, so the simulator's TTFT is 200 ms x 1/3 = 67 ms instead of 200 ms (bounds halfway: 133 ms)."""
    sim_args = ("--ttft-ms", str(SIM_TTFT_MS), "--itl-ms", "5", "--prefix-cache-blocks", "100000",
                "--session-header", "X-Session-Id")  # fmt: skip
    with run_sim(*sim_args) as sim:
        opts = options("--host", sim.url, "--prefix-tokens", "1024", "--prefix-pool", "8", "--prefix-zipf", "1.0",
                       "--prompt-tokens", "512", "--max-tokens", "4", "--ignore-eos", "--seed", "3",
                       "--session-header", "X-Session-Id", "--metrics-url", f"{sim.url}/metrics",
                       "--metrics-interval-s", "0.5", "--results-dir", str(tmp_path))  # fmt: skip
        # users 0.5 s apart: each has connected before the next one draws, so requests reach the server in the
        # order they drew their prefix (totals agree in any order; the per-request reuse labels need the order)
        run_local(opts, users=4, seconds=4, stop_timeout_s=10, spawn_rate=2)  # every request sent ends
        trace = sim.trace()
        with urllib.request.urlopen(sim.url + "/metrics", timeout=5) as response:
            page = response.read().decode()
    summary = read_summary(tmp_path)
    reuse = summary["prefix_reuse"]
    assert summary["failures"] == {} and len(trace) == summary["throughput"]["requests_ok"] >= 20
    assert reuse["blocks"] == _sum(trace, "prefix_blocks") == 3 * len(trace)
    assert reuse["blocks_seen"] == _sum(trace, "prefix_blocks_hit")  # expected reuse = the cold cache's hits
    assert reuse["expected_reuse"] > 0.5  # at most 8 first draws of a prefix miss
    hits = _sum(trace, "prefix_blocks_hit") * BLOCK_TOKENS
    assert f'vllm:prefix_cache_hits_total{{model_name="llm-locust-sim"}} {hits}' in page
    assert len({r["session"] for r in trace}) == len(trace)  # a synthetic request is its own session
    by_reuse = {row["label"]: row for row in summary["breakdowns"]["reuse"]}
    assert set(by_reuse) == {"0%", "50-74%"}  # a prefix is new (0 of 3 blocks seen) or seen (2 of 3)
    assert 1 <= by_reuse["0%"]["requests_ok"] <= 8  # the first draw of each prefix (one process)
    halfway_ms = (SIM_TTFT_MS + SIM_TTFT_MS / 3) / 2
    assert by_reuse["0%"]["metrics"]["ttft_ms"]["p50"] > halfway_ms
    assert by_reuse["50-74%"]["metrics"]["ttft_ms"]["p50"] < halfway_ms
    (server,) = summary["server"]["urls"]  # the scraped hit rate: hit / looked-up tokens between two scrapes
    assert server["prefix_cache_queries"] > 0 and 0.3 < server["prefix_cache_hit_rate"] <= 2 / 3
    page = build_report([tmp_path], tmp_path / "report.html", png=False).html_path.read_text()
    assert "Prefix reuse" in page and "expected reuse" in page and "by reuse" in page and "50-74%" in page


TURN_WORDS = BLOCK_TOKENS + 88  # a user turn fills the first block: the next turn's history hits it


def _conversations(count: int, turns: int) -> list[dict]:
    """ShareGPT conversations; conversation c's user turns have TURN_WORDS + c words, its replies 2: lengths tell
    them apart."""
    result = []
    for c in range(count):
        messages = []
        for t in range(turns):
            messages.append({"from": "human", "value": " ".join(f"c{c}t{t}" for _ in range(TURN_WORDS + c))})
            messages.append({"from": "gpt", "value": "ok ok"})
        result.append({"conversations": messages})
    return result


def test_sessions_stay_whole_and_in_order_through_master_and_three_workers(tmp_path):
    """Each conversation is played by one user: its turns reach the server one after the other (each sent after
    the previous answer's last token), each with the whole history (so the server's prefix cache hits it), and no
    session repeats or skips a turn."""
    count, turns = 5, 3
    dataset = tmp_path / "chat.json"
    dataset.write_text(json.dumps(_conversations(count, turns)))
    lengths = {c: [(t + 1) * (TURN_WORDS + c) + 2 * t for t in range(turns)] for c in range(count)}  # words per turn
    sim_args = ("--ttft-ms", "20", "--itl-ms", "5", "--session-header", "X-Session-Id", "--prefix-cache-blocks", "1000")
    with run_sim(*sim_args) as sim:
        result = run_locust(LOCUSTFILE, "--host", sim.url, "--dataset", str(dataset), "--max-tokens", "4",
                            "--session-header", "X-Session-Id", "--processes", "3", "-u", "9", "-r", "9",
                            "--run-time", "4s", "--stop-timeout", "10",
                            "--results-dir", str(tmp_path / "r"))  # fmt: skip
        trace = sim.trace()
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_summary(tmp_path / "r")
    assert summary["run"]["workers_max"] == 3 and summary["failures"] == {}
    sessions: dict[str, list[dict]] = defaultdict(list)
    for record in sorted(trace, key=lambda r: r["t_recv"]):
        sessions[record["session"]].append(record)
    assert None not in sessions and len(sessions) >= 9 and len(trace) == summary["throughput"]["requests_ok"]
    for session, records in sessions.items():
        seen = [r["prompt_tokens"] for r in records]
        conversation = next(c for c, ls in lengths.items() if ls[0] == seen[0])
        assert seen == lengths[conversation][: len(seen)], session  # whole history, in order, never twice
        for before, after in itertools.pairwise(records):
            # one turn at a time: the next turn arrives after the last token of this one was handed to the socket
            # (its t_done is stamped after the write, when the client may already have sent the next turn)
            assert after["t_recv"] > before["token_times"][-1], session
            assert after["prefix_blocks_hit"] >= before["prefix_blocks"] >= 1, session  # its history was cached


def test_a_traces_expected_reuse_equals_the_cold_caches(tmp_path):
    """Mooncake hash_ids built the way production traces are (a request's ids are a prefix chain: 4 roots of 1 to 3
    blocks, then blocks of its own): the client's expected reuse of the replay equals the simulator's cache hits."""
    rows, t_ms, own = [], 0, 10_000
    for i in range(120):
        t_ms += 20
        shared = 1 + i % 3
        root = [100 * (i % 4) + j for j in range(shared)]
        ids = [*root, own, own + 1]
        own += 2
        length = (len(ids) - 1) * BLOCK_TOKENS + 7 + i  # the last block cut short: never cached
        rows.append({"timestamp": t_ms, "input_length": length, "output_length": 2, "hash_ids": ids})
    trace_file = tmp_path / "trace.jsonl"
    trace_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--prefix-cache-blocks", "100000") as sim:
        result = run_locust(LOCUSTFILE.parent / "trace.py", "--host", sim.url, "-u", "8", "-r", "8", "-t", "30s",
                            "--trace", str(trace_file), "--trace-speedup", "4", "--seed", "2",
                            "--results-dir", str(tmp_path / "r"))  # fmt: skip
        trace = sim.trace()
    assert result.returncode == 0, result.stderr[-2000:]
    reuse = read_summary(tmp_path / "r")["prefix_reuse"]
    assert len(trace) == len(rows)
    assert reuse["blocks"] == _sum(trace, "prefix_blocks") == sum(len(r["hash_ids"]) - 1 for r in rows)
    assert reuse["blocks_seen"] == _sum(trace, "prefix_blocks_hit") > 0
