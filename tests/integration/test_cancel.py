"""Cancelled streams (--cancel-rate with --cancel-after-tokens / --cancel-after-ms): counted as cancelled, not
failed, in binomial bounds; the simulator sees each client leave, stops decoding and frees the batch slot."""

from __future__ import annotations

import csv
import json
import math
import re
import socket
import urllib.request

import pytest
from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust, wait_for

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.report.run_data import load_run
from llm_locust.report.server import server_rows
from llm_locust.sim import SimProcess, run_sim

pytestmark = pytest.mark.alone  # cancelled shares and server slots against the trace


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cancel-rate", "1.5", "--cancel-after-tokens", "4"], "fraction in [0, 1]"),
        (["--cancel-rate", "0.5"], "needs --cancel-after-tokens N or --cancel-after-ms T"),
        (["--cancel-after-ms", "100"], "need --cancel-rate P"),
        (["--cancel-rate", "0.5", "--cancel-after-tokens", "4", "--cancel-after-ms", "9"], "exclude each other"),
        (["--cancel-rate", "0.5", "--cancel-after-tokens", "-1"], "must be >= 0"),
        (["--cancel-rate", "0.5", "--cancel-after-tokens", "4", "--client", "openai-sdk"], "needs the fast client"),
    ],
)
def test_bad_cancel_options(args, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_options(options("--host", "http://127.0.0.1:1", *args))


def running(sim: SimProcess) -> float:
    """The simulator's vllm:num_requests_running gauge now."""
    with urllib.request.urlopen(f"{sim.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return float(re.search(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.M).group(1))


def test_sim_frees_the_slot_when_the_client_leaves():
    """One batch slot: a stream holds it (running 1); the client closes the connection; running falls to 0 and the
    next request gets the slot at once, not after the first one's 2000 tokens (>= 20 s)."""
    with run_sim(
        "--timing", "batching", "--max-batch", "1", "--decode-step-ms", "10", "--output-tokens", "2000"
    ) as sim:
        body = json.dumps({"model": "llm-locust-sim", "stream": True, "max_tokens": 2000, "ignore_eos": True,
                           "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
        with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:
            sock.sendall(request)
            received = b""
            while received.count(b"data: ") < 4:
                received += sock.recv(65536)
            assert running(sim) == 1
        wait_for(lambda: running(sim) == 0, 5, "running sequences to fall to 0 after the client left")
        (record,) = sim.trace()
        assert record["cancelled"] is True and record["completion_tokens"] < 2000
        with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:  # the slot is free
            sock.sendall(request)
            received = b""
            while received.count(b"data: ") < 4:
                received += sock.recv(65536)  # would wait >= 20 s for a slot that was not freed


def test_cancelled_share_within_binomial_bounds(tmp_path):
    """200 requests (master + 2 workers), 30 % cancelled after 4 tokens of 64: the share is within 4 sigma, each
    cancelled request is one the simulator saw cancelled (and stopped decoding), TTFT counts them, E2E and output
    tokens keep them apart."""
    rate, n, after, tokens = 0.3, 200, 4, 64  # 60 tokens (180 ms) after the cut: the server cannot finish first
    with run_sim("--ttft-ms", "20", "--itl-ms", "3", "--output-tokens", str(tokens)) as sim:
        proc = run_locust(LOCUSTFILE, "--host", sim.url, "-u", "8", "-r", "8", "-t", "60s", "--processes", "2",
                          "--max-requests", str(n), "--max-tokens", str(tokens), "--ignore-eos", "--seed", "7",
                          "--cancel-rate", str(rate), "--cancel-after-tokens", str(after),
                          "--results-dir", str(tmp_path))  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        trace = [r for r in sim.trace() if r["endpoint"] == "chat"]
    summary = read_summary(tmp_path)
    t, m = summary["throughput"], summary["metrics"]
    cancelled = t["requests_cancelled"]
    assert t["requests_ok"] + cancelled == n and t["requests_failed"] == 0 and summary["failures"] == {}
    assert abs(cancelled - rate * n) <= 4 * math.sqrt(n * rate * (1 - rate)), cancelled
    # the server's side: every cancelled request left early, and the server stopped decoding it
    server_cancelled = [r for r in trace if r["cancelled"]]
    assert len(trace) == n and len(server_cancelled) == cancelled
    assert all(after <= r["completion_tokens"] < tokens for r in server_cancelled)
    assert all(r["completion_tokens"] == tokens for r in trace if not r["cancelled"])
    # TTFT counts every request; E2E and output tokens keep the cancelled ones apart
    assert m["ttft_ms"]["count"] == n
    assert m["e2e_ms"]["count"] == m["output_tokens"]["count"] == t["requests_ok"]
    assert m["output_tokens"]["min"] == tokens
    assert m["e2e_cancelled_ms"]["count"] == m["output_tokens_cancelled"]["count"] == cancelled
    assert after <= m["output_tokens_cancelled"]["min"] and m["output_tokens_cancelled"]["max"] < tokens
    assert m["e2e_cancelled_ms"]["p50"] < m["e2e_ms"]["p50"]  # ~3 gaps of 3 ms instead of 63
    assert t["output_tokens"] == tokens * t["requests_ok"]  # throughput: completed requests only
    assert re.search(r"\d+ failed, \d+ cancelled\)", proc.stdout + proc.stderr)  # the console summary line


def test_cancel_after_ms_frees_server_slots(tmp_path):
    """Two batch slots, 500-token answers (>= 5 s each), every stream cancelled 100 ms after sending: the slots
    come back, so the 4 users' requests keep getting first tokens — a server that kept decoding would have admitted
    (and answered) only the first 2 in 3 s. The server-metrics scrape sees at most the 2 slots running."""
    with run_sim("--timing", "batching", "--max-batch", "2", "--decode-step-ms", "10", "--output-tokens", "500") as sim:
        opts = options("--host", sim.url, "--max-tokens", "500", "--ignore-eos", "--cancel-rate", "1",
                       "--cancel-after-ms", "100", "--results-dir", str(tmp_path), "--metrics-url",
                       f"{sim.url}/metrics", "--metrics-interval-s", "0.25")  # fmt: skip
        run_local(opts, users=4, seconds=3)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    t = summary["throughput"]
    assert t["requests_ok"] == 0 and t["requests_failed"] == 0
    assert t["requests_cancelled"] >= 20, t  # one per user per 100 ms
    assert all(r["cancelled"] and r["completion_tokens"] < 500 for r in trace)
    m = summary["metrics"]
    # requests with a first token within their 100 ms: ~half of them when slots are freed; <= 2 when they are not
    assert 20 <= m["ttft_ms"]["count"] <= t["requests_cancelled"], (m["ttft_ms"]["count"], t)
    assert m["e2e_cancelled_ms"]["max"] < 1000  # the last token before the cut (500 tokens would take >= 5 s)
    with (tmp_path / "server_metrics.csv").open() as f:
        scraped = [float(r["running"]) for r in csv.DictReader(f) if r["url"] == f"{sim.url}/metrics"]
    assert scraped and max(scraped) <= 2
    (row,) = server_rows(load_run(tmp_path))  # the report's "Server's perspective": the tokens of cancelled streams
    cancelled_tokens = m["output_tokens_cancelled"]["mean"] * m["output_tokens_cancelled"]["count"]
    assert row["client_cancelled_tokens"] == round(cancelled_tokens) > 0 and row["client_output_tokens"] == 0


def test_cancel_over_tls(tmp_path, pki):
    """Over HTTPS (the stream is read by its own greenlet, not the pump): every stream closed after 3 of its 64
    tokens, counted as cancelled, and the simulator sees each client leave."""
    with run_sim("--ttft-ms", "10", "--itl-ms", "5", "--output-tokens", "64", "--tls-cert", str(pki / "good.crt"),
                 "--tls-key", str(pki / "good.key")) as sim:  # fmt: skip
        opts = options("--host", sim.url, "--ca-bundle", str(pki / "ca.pem"), "--max-tokens", "64", "--ignore-eos",
                       "--cancel-rate", "1", "--cancel-after-tokens", "3", "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=2, seconds=1.5)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    t, m = summary["throughput"], summary["metrics"]
    assert t["requests_cancelled"] >= 10 and t["requests_ok"] == 0 and summary["failures"] == {}, t
    assert m["output_tokens_cancelled"]["min"] >= 3 and m["output_tokens_cancelled"]["max"] < 64
    server_cancelled = [r for r in trace if r["cancelled"]]
    assert len(server_cancelled) >= t["requests_cancelled"]  # (and the requests cut by the stop)
    assert all(r["completion_tokens"] < 64 for r in server_cancelled)


def test_cancel_before_the_response_head(tmp_path):
    """A server slow to answer (1 s before its head): streams cancelled 100 ms after sending are cancelled, not
    failed, with no TTFT and no token, and each was sent once (no retry)."""
    with run_sim("--fault", "slow_headers=1", "--fault-slow-headers-ms", "1000", "--ttft-ms", "10") as sim:
        opts = options("--host", sim.url, "--model", "llm-locust-sim", "--max-tokens", "8", "--cancel-rate", "1",
                       "--cancel-after-ms", "100", "--results-dir", str(tmp_path))  # fmt: skip
        run_local(opts, users=2, seconds=1.5)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    t, m = summary["throughput"], summary["metrics"]
    assert t["requests_cancelled"] >= 6 and t["requests_ok"] == 0 and summary["failures"] == {}, summary
    assert m["ttft_ms"]["count"] == 0 and m["output_tokens_cancelled"]["max"] == 0
    assert (
        t["requests_cancelled"] <= len(trace) <= t["requests_cancelled"] + 2
    )  # one server request per cancelled one (+ the 2 cut by the stop)
