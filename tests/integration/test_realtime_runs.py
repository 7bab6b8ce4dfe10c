"""The Realtime API over WebSocket against the simulator: multi-turn sessions on one socket each, over ws:// and wss://,
read by the process's pump with kernel receive times; each turn's first delta after `response.create` and the gaps
between deltas agree with the simulator's own write times (tests/harness/trace_agreement.py's bounds)."""

from __future__ import annotations

from pathlib import Path

import gevent
import pytest
from conftest import read_summary, run_locust
from harness.trace_agreement import (
    assert_within,
    first_output_pairs,
    percentile,
    request_lines,
    served_first_ms,
    served_gaps_ms,
    steady,
)

from llm_locust.apis import realtime
from llm_locust.metrics.record import RequestRecord
from llm_locust.sim import run_sim
from llm_locust.transport import patches, tls
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.websocket import HandshakeRefused, WebSocket

KEY = "sk-realtime"
SESSIONS, TURNS, TOKENS = 8, 4, 12


def session(url: str, context, watchdog: TimeoutWatchdog) -> list[RequestRecord]:
    ws = WebSocket(f"{url}/v1/realtime?model=llm-locust-sim", {"Authorization": f"Bearer {KEY}"}, context)
    records = []
    for number in range(TURNS):
        record = RequestRecord("realtime", 0.0)
        events = [realtime.user_item(f"question {number} one two"), realtime.response_create(TOKENS)]
        records.append(ws.exchange(events, record, realtime.apply_event, watchdog))
    ws.close()
    return records


@pytest.mark.alone  # first delta and gaps within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_turns_agree_with_the_trace(scheme, pki):
    patches.install()
    served = ("--tls-cert", str(pki / "good.crt"), "--tls-key", str(pki / "good.key")) if scheme == "https" else ()
    context = tls.client_context(str(pki / "ca.pem")) if scheme == "https" else None
    with run_sim("--ttft-ms", "30", "--itl-ms", "8", "--output-tokens", "64", "--api-key", KEY, *served) as sim:
        watchdog = TimeoutWatchdog(10.0, 30.0)
        url = f"{'wss' if scheme == 'https' else 'ws'}://127.0.0.1:{sim.port}"
        jobs = [gevent.spawn(session, url, context, watchdog) for _ in range(SESSIONS)]
        gevent.joinall(jobs, raise_error=True)
        records = [record for job in jobs for record in job.value]
        trace = {r["id"]: r for r in sim.trace() if r["endpoint"] == "realtime"}
        watchdog.stop()
    assert len(records) == SESSIONS * TURNS == len(trace)
    assert all(record.ok and record.finish_reason == "length" for record in records), [r.error_message for r in records]
    for record in records:  # the counts per turn equal the trace's
        served_record = trace[record.server_request_id]
        assert record.events == len(served_record["token_times"]) == record.usage_completion_tokens == TOKENS
        assert record.prompt_tokens == served_record["prompt_tokens"]
    sessions = {}
    for served_record in trace.values():
        sessions.setdefault(served_record["session"], []).append(served_record)
    assert len(sessions) == SESSIONS and all(len(turns) == TURNS for turns in sessions.values())
    ours_first = [(record.t_first - record.t_send) * 1e3 for record in records]
    theirs_first = served_first_ms(list(trace.values()))
    ours_gaps = [gap / 1e3 for record in records for gap in record.itl_us]
    theirs_gaps = served_gaps_ms(list(trace.values()))
    figures = {
        f"{name} {label}": (percentile(ours, share), percentile(theirs, share))
        for name, ours, theirs in (("first delta", ours_first, theirs_first), ("gap", ours_gaps, theirs_gaps))
        for label, share in (("p50", 0.5), ("p99", 0.99))
    }
    assert_within(figures, f"realtime {scheme}", p99_ms=25.0)  # the p99s: as the other API run tests hold them
    for record in records:  # the turn's latency: response.create handed over → response.done read
        assert record.t_done >= record.t_last > record.t_first > record.t_send


def test_a_refused_handshake_says_why(pki):
    patches.install()
    with run_sim("--api-key", KEY) as sim, pytest.raises(HandshakeRefused, match="HTTP 401"):
        WebSocket(f"ws://127.0.0.1:{sim.port}/v1/realtime", {"Authorization": "Bearer wrong"})


LOCUSTFILE = Path(__file__).parents[2] / "locustfiles" / "realtime.py"
REQUESTS = 160


@pytest.mark.alone  # first delta and gaps within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_sessions_through_master_and_two_workers_agree_with_the_trace(tmp_path, pki, scheme):
    """locustfiles/realtime.py through a master and 2 workers: 0 failures; every turn's deltas and tokens as the
    simulator wrote them, 4 turns per session; the first delta after `response.create` and every gap within 1 ms at
    p50 (25 ms at p99, as the other API run tests) of the simulator's write times."""
    served_tls = ("--tls-cert", str(pki / "good.crt"), "--tls-key", str(pki / "good.key")) if scheme == "https" else ()
    trust = ("--ca-bundle", str(pki / "ca.pem")) if scheme == "https" else ()
    with run_sim("--ttft-ms", "40", "--itl-ms", "10", "--output-tokens", "8", *served_tls) as sim:
        assert sim.url.startswith(f"{scheme}://")
        proc = run_locust(LOCUSTFILE, "--host", sim.url, "--model", "llm-locust-sim", "-u", "6", "-r", "6", "-t", "60s",
                          "--processes", "2", "--max-requests", str(REQUESTS), "--requests-jsonl", "--results-dir",
                          str(tmp_path), *trust)  # fmt: skip
        trace = [r for r in sim.trace() if r["endpoint"] == "realtime"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path)
    m, t = summary["metrics"], summary["throughput"]
    lines = request_lines(tmp_path)
    # --max-requests counts arrivals (a task's first turn): the sessions under way go on until the stop, which cuts at
    # most one turn per user (answered by the simulator, reported by nobody)
    served = {r["id"]: r for r in trace if r["id"] in {line["request_id"] for line in lines}}
    assert len(served) == len(lines) and len(trace) - len(served) <= 6
    assert summary["failures"] == {} and t["requests_ok"] == len(served) >= REQUESTS
    assert summary["run"]["role"] == "master" and summary["run"]["workers_max"] == 2
    assert t["output_tokens"] == sum(r["completion_tokens"] for r in served.values()) == 8 * len(served)
    assert t["prompt_tokens"] == sum(r["prompt_tokens"] for r in served.values())
    assert sorted({line["turn"] for line in lines}) == [1, 2, 3, 4]
    served_first, served_gaps = served_first_ms(list(served.values())), served_gaps_ms(list(served.values()))
    assert m["itl_ms"]["count"] == len(served_gaps) == 7 * len(served)
    kept = steady(lines)
    ours_ms, truth_ms = first_output_pairs(kept, served)
    figures = {
        "first delta p50": (m["ttft_ms"]["p50"], percentile(served_first, 0.5)),
        "first delta p99 (connections up)": (percentile(ours_ms, 0.99), percentile(truth_ms, 0.99)),
        "gap p50": (m["itl_ms"]["p50"], percentile(served_gaps, 0.5)),
        "gap p99": (m["itl_ms"]["p99"], percentile(served_gaps, 0.99)),
    }
    assert len(kept) >= REQUESTS // 2
    assert_within(figures, f"{scheme}, {len(kept)} steady", p99_ms=25.0)
