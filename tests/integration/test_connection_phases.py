"""A request's connection: new or reused, a new one's TCP connect and TLS handshake, the time to the response
headers — against the simulator with a known accept delay (`llm-locust sim --accept-delay-ms`); and a stale
kept-alive connection (closed by the server before any byte of the response) retried once on a new one."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import gevent
import pytest
from conftest import options, read_summary, run_local
from harness.sse_server import HEADERS as HEAD
from harness.sse_server import chunk, read_request, serve

from llm_locust.results.request_lines import REQUESTS_FILE
from llm_locust.sim import run_sim

pytestmark = pytest.mark.alone  # connect, handshake and header times within 1-3 ms

DELAY_MS = 40.0
SIM_ARGS = ("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "4")
EVENTS = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(3)]
DONE = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def local_summary(tmp_path: Path, host: str, *extra: str, users: int = 4) -> dict:
    """A 1.5 s run of `users` users (started at once); its summary.json."""
    opts = options("--host", host, "--model", "llm-locust-sim", "--max-tokens", "4", "--results-dir", str(tmp_path),
                   *extra)  # fmt: skip
    run_local(opts, users=users, seconds=1.5)
    return read_summary(tmp_path)


def test_plain_connection_phases_with_a_known_accept_delay(tmp_path):
    """TCP connect is the kernel's (~0: the delay is after the accept); a new connection's first response head
    comes after the delay; the requests after it go on the kept-alive connections, counted as reused."""
    with run_sim(*SIM_ARGS, "--accept-delay-ms", str(DELAY_MS)) as sim:
        summary = local_summary(tmp_path, sim.url)
    ok, m, connections = summary["throughput"]["requests_ok"], summary["metrics"], summary["connections"]
    assert summary["failures"] == {} and ok >= 8
    assert connections == {"new": 4, "reused": ok - 4, "retried_stale": 0}
    assert m["connect_ms"]["count"] == 4 and m["connect_ms"]["p50"] < 1.0, m["connect_ms"]
    assert m["tls_handshake_ms"]["count"] == 0
    assert m["ttfb_ms"]["count"] == ok and m["ttfb_ms"]["max"] >= DELAY_MS  # a new connection's first head
    assert m["ttfb_ms"]["p50"] < 5.0, m["ttfb_ms"]  # on a kept-alive connection the simulator answers at once


def test_every_request_has_its_upload_between_its_send_and_its_headers(tmp_path):
    """The upload phase (to a request's last byte handed to the kernel): one sample per request, and in
    requests.jsonl each line's `t_uploaded` after its `t_send` and before its first token (the simulator's 10 ms
    later; the response head may come before the sending greenlet is back from `sendall`: it answers on receipt)."""
    with run_sim(*SIM_ARGS) as sim:
        summary = local_summary(tmp_path, sim.url, "--requests-jsonl", "--prompt-tokens", "20000")
    ok = summary["throughput"]["requests_ok"]
    assert summary["failures"] == {} and ok >= 8 and summary["metrics"]["upload_ms"]["count"] == ok
    lines = [json.loads(line) for line in (tmp_path / REQUESTS_FILE).read_text().splitlines()]
    assert len(lines) == ok and all(line["t_send"] < line["t_uploaded"] < line["t_first"] for line in lines)


def served_head_ms(trace: list[dict]) -> float:
    """The median time from a request's arrival to its response head in the simulator's `trace` (ms; requests the
    run's end cut before their head left out)."""
    return statistics.median((r["t_head"] - r["t_recv"]) * 1e3 for r in trace if r["t_head"] is not None)


def test_time_to_response_headers_with_a_known_header_delay(tmp_path):
    """Every response head sent 40 ms after its request (the simulator's `slow_headers`), on kept-alive
    connections: the time to the headers is longer by the simulator's own delay, within 1 ms. The delay is 40 ms or
    a little more — the simulator's asyncio timer wakes on epoll's millisecond ticks, 1-2 ms late — and is read from
    its trace: the median time from a request's arrival to its response head (`t_head`), delayed against not."""
    with run_sim(*SIM_ARGS) as sim:
        base = local_summary(tmp_path / "base", sim.url, users=2)
        base_head_ms = served_head_ms(sim.trace())
    with run_sim(*SIM_ARGS, "--fault", "slow_headers=1", "--fault-slow-headers-ms", str(DELAY_MS)) as sim:
        summary = local_summary(tmp_path / "delayed", sim.url, users=2)
        delayed_head_ms = served_head_ms(sim.trace())
    for s in (base, summary):
        assert s["failures"] == {} and s["connections"]["reused"] >= 10
    served_delay_ms = delayed_head_ms - base_head_ms
    delayed_ms, base_ms = summary["metrics"]["ttfb_ms"]["p50"], base["metrics"]["ttfb_ms"]["p50"]
    print(f"time to headers p50: {delayed_ms:.3f} ms delayed, {base_ms:.3f} ms not; served delay {served_delay_ms:.3f}")
    assert DELAY_MS <= served_delay_ms < DELAY_MS + 5.0 and delayed_ms >= DELAY_MS
    assert abs(delayed_ms - base_ms - served_delay_ms) <= 1.0, (delayed_ms, base_ms, served_delay_ms)


def test_tls_connection_phases_with_a_known_accept_delay(tmp_path, pki):
    """Over HTTPS the delay is before the server reads the ClientHello: inside the TLS handshake, which is then
    the delay plus the handshake's own time. The delay is a little longer than asked — the simulator's asyncio timer
    wakes 0-3 ms late — and is read from its trace: each connection's first request carries the delay it was served
    (`accept_delay_s`). What is left of the quickest handshake is no longer than a handshake of the same simulator
    without the delay: the slowest of its 4 at once (they wait for the server's CPU and the client's users'
    start; their quickest was 1.3-3.5 ms where the delayed handshake's own time was 0.8-1.7 ms, so the quickest of
    one run is no yardstick for the other)."""
    tls = ("--tls-cert", str(pki / "good.crt"), "--tls-key", str(pki / "good.key"))
    trust = ("--ca-bundle", str(pki / "ca.pem"))
    with run_sim(*SIM_ARGS, *tls) as sim:
        base = local_summary(tmp_path / "base", sim.url, *trust)
        assert {r["accept_delay_s"] for r in sim.trace()} == {0.0}
    with run_sim(*SIM_ARGS, *tls, "--accept-delay-ms", str(DELAY_MS)) as sim:
        summary = local_summary(tmp_path / "delayed", sim.url, *trust)
        served_ms = sorted(r["accept_delay_s"] * 1e3 for r in sim.trace() if r["accept_delay_s"])
    for s in (base, summary):
        assert s["failures"] == {} and s["connections"]["new"] == 4 and s["connections"]["reused"] >= 4
        assert s["metrics"]["tls_handshake_ms"]["count"] == s["metrics"]["connect_ms"]["count"] == 4
    assert len(served_ms) == 4 and served_ms[0] >= DELAY_MS and served_ms[-1] < DELAY_MS + 5.0, served_ms
    delayed_ms, slowest_ms = summary["metrics"]["tls_handshake_ms"]["min"], base["metrics"]["tls_handshake_ms"]["max"]
    own_ms = delayed_ms - served_ms[0]  # the quickest handshake after the least delay
    print(f"TLS handshake: {delayed_ms:.3f} ms after {served_ms[0]:.3f} served, undelayed at most {slowest_ms:.3f}")
    # the client starts timing at its connect, a moment before the server's accept starts the delay: -1 ms allowed
    assert delayed_ms >= DELAY_MS and -1.0 <= own_ms <= slowest_ms, (delayed_ms, served_ms, slowest_ms)
    # the first head of a new connection: after its handshake; the others' at once
    assert summary["metrics"]["ttfb_ms"]["max"] >= delayed_ms
    assert summary["metrics"]["ttfb_ms"]["p50"] < 5.0


# -- a stale kept-alive connection ---------------------------------------------------------------------------------
def answer_then_close(sock, _address):
    """One whole response (offering keep-alive), then the connection closed a moment later — after the client's
    next request is on its way (llama.cpp's server does so)."""
    if read_request(sock):
        sock.sendall(HEAD + b"".join(chunk(e) for e in [*EVENTS, DONE]) + b"0\r\n\r\n")
        gevent.sleep(0.02)
    sock.close()


def close_mid_response(sock, _address):
    """The head and a token, then the connection closed: a response cut short."""
    if read_request(sock):
        sock.sendall(HEAD + chunk(EVENTS[0]))
    sock.close()


def run_against(handler, tmp_path: Path, *extra: str) -> dict:
    server = serve(handler)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m", "--results-dir",
                       str(tmp_path), *extra)  # fmt: skip
        run_local(opts, users=1, seconds=3.0)
    finally:
        server.stop(timeout=0)
    return read_summary(tmp_path)


def test_a_stale_kept_alive_connection_is_retried_once_on_a_new_one(tmp_path):
    summary = run_against(answer_then_close, tmp_path, "--max-requests", "50")
    connections = summary["connections"]
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] == 50, summary["failures"]
    assert connections["retried_stale"] > 0
    assert connections["new"] == 50 and connections["reused"] == 0  # each sent (again) on a new connection


def test_a_connection_closed_mid_response_is_still_a_failure(tmp_path):
    summary = run_against(close_mid_response, tmp_path, "--max-requests", "10")
    assert summary["throughput"]["requests_ok"] == 0 and summary["failures"] == {"transport": 10}
    assert summary["connections"]["retried_stale"] == 0
