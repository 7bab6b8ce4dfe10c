"""Trace replay end to end (locustfiles/trace.py) against the simulator: every request once, at its time, with its
lengths, through master + workers; and the total arrival process of --arrival constant/gamma with several workers.

Send-time error: the simulator stamps each request with the kernel's receive time (perf_counter, the same clock on
this machine); a request cannot leave early, so the most punctual request fixes the trace's time 0 and each error is
how much later than that one a request arrived, relative to its due time.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, free_port, options, read_summary, run_local, run_locust, wait_for

from llm_locust.report.build import build_report
from llm_locust.sim import run_sim

TRACE_FILE = ROOT / "locustfiles" / "trace.py"
RATE_FILE = ROOT / "locustfiles" / "rate.py"
SMALL_SPEEDUP = 40
START_S = 1.0
ON_TIME_P50_MS = 20.0
ON_TIME_P99_MS = 500.0
SIM_ARGS = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4", "--trace-limit", "100000")


def mooncake_trace(path, n: int, mean_gap_ms: float, seed: int = 1) -> list[dict]:
    """A Mooncake-format trace of `n` requests; each has its own input length (64 + i, so the simulator's count
    names it) and prompts share a first block in turn, as agent traffic does."""
    rng = random.Random(seed)
    rows, t_ms, next_id = [], 0.0, 100
    for i in range(n):
        t_ms += rng.expovariate(1 / mean_gap_ms)
        length = 64 + i
        blocks = -(-length // 512)
        ids = [i % 4, *range(next_id, next_id + blocks - 1)]
        next_id += blocks - 1
        rows.append({"timestamp": int(t_ms), "input_length": length, "output_length": 1 + i % 6, "hash_ids": ids})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def replayed(sim, lengths_in: list[int], due_s: list[float]) -> dict[str, float]:
    """Check every traced request reached the simulator exactly once; return the send-time error's p50 and p99 in
    ms (see the module docstring) of the requests due after `START_S` (users spawning, connections opening, the
    model looked up) and the records by input length."""
    records = [r for r in sim.trace() if r["endpoint"] == "chat"]
    by_length = {r["prompt_tokens"]: r for r in records}
    twice = sorted(n for n, k in Counter(r["prompt_tokens"] for r in records).items() if k > 1)
    assert len(records) == len(lengths_in) == len(by_length), (len(records), len(lengths_in), twice[:20])
    assert sorted(by_length) == sorted(lengths_in)
    late_s = np.array([by_length[n]["t_recv"] - t for n, t in zip(lengths_in, due_s, strict=True)])
    error_ms = ((late_s - late_s.min()) * 1e3)[np.array(due_s) >= START_S]
    return {"p50": float(np.percentile(error_ms, 50)), "p99": float(np.percentile(error_ms, 99)), "records": by_length}


@pytest.mark.alone  # sends at their trace times
def test_mooncake_trace_through_master_and_three_workers(tmp_path):
    rows = mooncake_trace(tmp_path / "trace.jsonl", 2000, mean_gap_ms=50)
    speedup = 10  # 20 requests/s traced -> 200/s offered, 10 s
    with run_sim(*SIM_ARGS) as sim:
        proc = run_locust(
            TRACE_FILE, "--host", sim.url, "--processes", "3", "-u", "60", "-r", "60", "-t", "60s",
            "--trace", str(tmp_path / "trace.jsonl"), "--trace-speedup", str(speedup), "--seed", "5",
            "--results-dir", str(tmp_path / "results"), timeout_s=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        first_ms = rows[0]["timestamp"]
        error = replayed(
            sim, [r["input_length"] for r in rows], [(r["timestamp"] - first_ms) / 1e3 / speedup for r in rows]
        )
    print(f"send-time error through master + 3 workers: p50 {error['p50']:.2f} ms, p99 {error['p99']:.2f} ms")
    # measured ~0.3-1.5 ms p50, 3-46 ms p99 on this 2-core machine shared with other test runs (four Locust
    # processes and the simulator on two cores: a stalled process owes tens of ms). The bounds catch what a broken
    # hand-out would do -- a wrong origin or a share sent by the wrong clock is off by seconds in a 10 s replay --
    # and sit 10x above what a loaded machine costs.
    assert error["p50"] < ON_TIME_P50_MS and error["p99"] < ON_TIME_P99_MS, error
    for row in rows:
        assert error["records"][row["input_length"]]["completion_tokens"] == row["output_length"]
    summary = read_summary(tmp_path / "results")
    assert summary["run"]["stop_reason"] == "the trace's 2000 requests were sent"
    assert summary["throughput"]["requests_ok"] == 2000 and summary["load"]["model"] == "trace"
    by_worker = summary["run"]["requests_by_worker"]
    assert len(by_worker) == 3 and min(by_worker.values()) > 2000 * 0.15, by_worker  # the master shared it out
    seen_ids, blocks, seen = set(), 0, 0  # whole blocks, and those an earlier request had (an unbounded cache)
    for row in rows:
        whole = row["hash_ids"][: row["input_length"] // 512]
        blocks, seen = blocks + len(whole), seen + sum(b in seen_ids for b in whole)
        seen_ids.update(whole)
    assert (summary["prefix_reuse"]["blocks"], summary["prefix_reuse"]["blocks_seen"]) == (blocks, seen)
    assert seen > 0
    trace = summary["load"]["trace"]
    assert (trace["requests"], trace["format"], trace["speedup"]) == (2000, "mooncake", 10)
    offered = pd.read_csv(tmp_path / "results" / trace["offered_file"])
    assert offered["offered_requests"].sum() == 2000  # every request in the window it was due
    tokens_in = (offered["offered_requests"] * offered["input_tokens_mean"]).sum()  # means rounded to 0.1 token
    assert abs(tokens_in - sum(r["input_length"] for r in rows)) <= 0.05 * len(offered) * 2000
    report = build_report([tmp_path / "results"], png=False)
    (chart,) = [c for c in report.charts if c.key == "trace_replay"]
    labels = {trace.meta["label"] for trace in chart.figure.data}
    assert {"offered req/s", "achieved req/s", "offered input tokens", "expected reuse"} <= labels


def small_replay(tmp_path, fmt: str, text: str, rows: list[tuple[float, int, int]], *args: str) -> None:
    """Replay a small trace file in process at `SMALL_SPEEDUP` (`rows`: the requests expected, trace seconds, input and
    output tokens; `args`: more options); check it."""
    path = tmp_path / f"trace.{fmt}"
    path.write_text(text)
    with run_sim(*SIM_ARGS) as sim:
        speedup = str(SMALL_SPEEDUP)
        opts = options("--host", sim.url, "--trace", str(path), "--trace-format", fmt, "--ignore-eos",
                       "--trace-speedup", speedup, "--results-dir", str(tmp_path / "results"), *args)  # fmt: skip
        run_local(opts, users=8, seconds=(rows[-1][0] - rows[0][0]) / SMALL_SPEEDUP + 2)
        error = replayed(sim, [n for _, n, _ in rows], [(t - rows[0][0]) / SMALL_SPEEDUP for t, _, _ in rows])
    assert error["p50"] < ON_TIME_P50_MS and error["p99"] < ON_TIME_P99_MS, error  # as through the workers
    assert [error["records"][n]["completion_tokens"] for _, n, _ in rows] == [m for _, _, m in rows]
    assert read_summary(tmp_path / "results")["prefix_reuse"]["expected_reuse"] is None  # no hash ids


@pytest.mark.alone  # first-token times against the trace
def test_azure_trace(tmp_path):
    rng = random.Random(2)
    rows, t_s = [], 0.0
    for i in range(60):
        t_s += rng.expovariate(1.0)
        rows.append((t_s, 100 + i, 1 + i % 5))
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:{int(15 + t // 60):02d}:{t % 60:09.6f}0,{n},{m}\n" for t, n, m in rows
    )
    small_replay(tmp_path, "azure", text, rows)


def test_burstgpt_trace_keeps_the_model_asked_for(tmp_path):
    rng = random.Random(3)
    rows, lines, t_s = [], [], 0.0
    for i in range(80):
        t_s += rng.expovariate(1.0)
        model = "ChatGPT" if i % 4 else "GPT-4"
        lines.append(f"{t_s:.3f},{model},{200 + i},{1 + i % 5},{201 + i},Conversation log\n")
        if model == "ChatGPT":
            rows.append((t_s, 200 + i, 1 + i % 5))
    header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    small_replay(tmp_path, "burstgpt", header + "".join(lines), rows, "--trace-model", "ChatGPT")


def test_a_bad_trace_ends_the_run_with_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 1, "input_length": 10}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(TRACE_FILE), "--headless", "--host", "http://127.0.0.1:9",
         "--trace", str(path), "-t", "5s"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{path}:2: no field 'output_length'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("arrival", "burstiness"), [("constant", 1.0), pytest.param("gamma", 4.0, marks=pytest.mark.slow)]
)
@pytest.mark.alone  # arrival gaps within 10 % of the rate
def test_constant_and_gamma_arrivals_add_up_through_three_workers(tmp_path, arrival, burstiness):
    rate = 40.0
    with run_sim(*SIM_ARGS) as sim:
        proc = run_locust(
            RATE_FILE, "--host", sim.url, "--processes", "3", "-u", "30", "-r", "30", "-t", "8s",
            "--request-rate", str(rate), "--arrival", arrival, "--burstiness", str(burstiness), "--seed", "3",
            "--max-tokens", "4", "--ignore-eos", "--results-dir", str(tmp_path),
        )  # fmt: skip
        t = np.sort([r["t_recv"] for r in sim.trace() if r["endpoint"] == "chat"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    steady = t[(t > t[0] + 1.0) & (t < t[-1] - 0.5)]
    gaps = np.diff(steady)
    assert abs(1 / gaps.mean() - rate) / rate < 0.10, 1 / gaps.mean()
    assert len(read_summary(tmp_path)["run"]["requests_by_worker"]) == 3
    cv = gaps.std() / gaps.mean()
    print(f"{arrival} through 3 workers: {1 / gaps.mean():.2f} req/s, gap CV {cv:.3f}, gap p1/p50/p99 ms",
          np.round(np.percentile(gaps, [1, 50, 99]) * 1e3, 2))  # fmt: skip
    if arrival == "constant":
        # one constant process: every gap 25 ms (plus wake-up noise of ~1 ms); three independent constant workers
        # at 40/3 req/s would superpose into gaps spread over 0..75 ms, a third of them under 12.5 ms
        assert np.mean(np.abs(gaps - 1 / rate) > 0.5 / rate) < 0.05, np.percentile(gaps, [1, 50, 99])
    else:
        # gamma shape 4: CV 0.5; the superposition of three independent ones is near Poisson (CV -> 1): halfway
        assert 0.4 < cv < 0.75, cv


@pytest.mark.slow
def test_workers_joining_and_leaving_mid_replay_lose_and_repeat_nothing(tmp_path):
    """Master + 3 worker processes; a 4th joins after ~4 s, one of the first leaves (SIGTERM) after ~9 s: the
    master hands the leaver's unsent arrivals to the others and gives the newcomer a share from 2 s ahead."""
    rows = mooncake_trace(tmp_path / "trace.jsonl", 3000, mean_gap_ms=50)
    port = str(free_port())
    locust = [sys.executable, "-m", "locust", "-f", str(TRACE_FILE)]
    with run_sim(*SIM_ARGS) as sim:
        master_cmd = [*locust, "--master", "--headless", "--expect-workers", "3", "--master-bind-host", "127.0.0.1",
                      "--master-bind-port", port, "--enable-rebalancing", "-u", "48", "-r", "48", "-t", "90s",
                      "--host", sim.url, "--trace", str(tmp_path / "trace.jsonl"), "--trace-speedup", "7.5",
                      "--results-dir", str(tmp_path / "results"), "--stop-timeout", "10"]  # fmt: skip
        worker_cmd = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", port]
        log = tmp_path / "master.log"
        procs = []
        try:
            with log.open("w") as out:
                procs.append(subprocess.Popen(master_cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
            for i in range(3):
                with (tmp_path / f"worker{i}.log").open("w") as out:
                    procs.append(subprocess.Popen(worker_cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
            wait_for(lambda: "All users spawned" in log.read_text(), 60, "the users to spawn")
            time.sleep(4)
            with (tmp_path / "worker3.log").open("w") as out:
                procs.append(subprocess.Popen(worker_cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
            time.sleep(5)
            procs[1].send_signal(signal.SIGTERM)
            code = procs[0].wait(timeout=120)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=20)
        first_ms = rows[0]["timestamp"]
        due_s = [(r["timestamp"] - first_ms) / 1e3 / 7.5 for r in rows]
        error = replayed(sim, [r["input_length"] for r in rows], due_s)  # every request exactly once
    master_log = log.read_text()
    assert code in (0, 3), master_log[-3000:]  # 3: a worker quit mid-run, so the run says it is incomplete
    assert "left: its arrivals from #" in master_log and "go to 4 process(es)" in master_log, master_log[-3000:]
    print(f"join + leave: send-time error p50 {error['p50']:.2f} ms, p99 {error['p99']:.2f} ms")


@pytest.mark.alone  # each turn sent after its predecessor's answer, on time
def test_a_traces_sessions_follow_their_predecessors_through_two_workers(tmp_path):
    """AIPerf-style Mooncake rows with session_id and delay: 8 sessions of 3 turns, a first turn every 150 ms and
    later turns 200 ms after their predecessor's answer, plus 4 requests outside sessions. Each request reaches the
    simulator once; a session's turns come in order, each its delay after the previous answer ended (not before it,
    not much later); the run ends by itself when every turn was answered."""
    rows, due_ms = [], {}
    for s in range(8):
        for turn in range(3):
            length = 100 + 10 * s + turn  # the simulator's prompt_tokens name the session and the turn
            row = {"session_id": f"s{s}", "input_length": length, "output_length": 4}
            rows.append({**row, "timestamp": 150 * s} if turn == 0 else {**row, "delay": 200})
            if turn == 0:
                due_ms[length] = 150 * s
    for i in range(4):
        rows.insert(2 + 5 * i, {"timestamp": 100 + 300 * i, "input_length": 50 + i, "output_length": 4})
    rows.sort(key=lambda r: r.get("timestamp", 0) if "delay" not in r else 10_000)  # later turns at the end
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with run_sim(*SIM_ARGS, "--session-header", "X-Session-Id") as sim:
        proc = run_locust(TRACE_FILE, "--host", sim.url, "--processes", "2", "-u", "12", "-r", "12", "-t", "40s",
                          "--trace", str(path), "--session-header", "X-Session-Id",
                          "--results-dir", str(tmp_path / "results"))  # fmt: skip
        records = [r for r in sim.trace() if r["endpoint"] == "chat"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path / "results")
    assert summary["run"]["stop_reason"] == "the trace's 28 requests were sent"
    assert summary["throughput"]["requests_ok"] == len(records) == 28
    by_length = {r["prompt_tokens"]: r for r in records}
    assert sorted(by_length) == sorted(r["input_length"] for r in rows)  # each request once
    for s in range(8):
        turns = [by_length[100 + 10 * s + turn] for turn in range(3)]
        assert {r["session"] for r in turns} == {f"s{s}"}
        for before, after in itertools.pairwise(turns):
            gap_s = after["t_recv"] - before["token_times"][-1]
            assert 0.2 <= gap_s < 0.2 + 0.3, (s, gap_s)  # the delay after the answer, and not much more
    first = {n: by_length[n]["t_recv"] for n in due_ms}
    origin = min(t - due_ms[n] / 1e3 for n, t in first.items())
    assert all(t - origin - due_ms[n] / 1e3 < 0.5 for n, t in first.items())  # first turns at their time
    by_turn = {row["label"]: row["requests_ok"] for row in summary["breakdowns"]["turn"]}
    assert by_turn == {"1": 8, "2": 8, "3-4": 8}
