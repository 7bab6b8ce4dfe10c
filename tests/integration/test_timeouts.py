"""Read and whole-request timeouts against misbehaving servers on loopback: counted as `timeout`."""

from __future__ import annotations

import gevent
from conftest import options, read_summary, run_local
from harness.sse_server import HEADERS, chunk, read_request, serve


def stall_after_first_token(sock, _address):
    """Sends the headers and one token, then nothing."""
    read_request(sock)
    sock.sendall(HEADERS + chunk(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'))
    gevent.sleep(30)


def keep_alive_forever(sock, _address):
    """Sends a keep-alive comment every 100 ms and never finishes."""
    read_request(sock)
    sock.sendall(HEADERS)
    for _ in range(300):
        sock.sendall(chunk(b": keep-alive\n\n"))
        gevent.sleep(0.1)


def test_silence_longer_than_read_timeout(tmp_path):
    server = serve(stall_after_first_token)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m", "--read-timeout-s", "0.5",
                       "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=2, seconds=2.0)
    finally:
        server.stop(timeout=0)
    summary = read_summary(tmp_path)
    assert summary["failures"].get("timeout", 0) >= 4, summary["failures"]
    assert set(summary["failures"]) == {"timeout"} and summary["throughput"]["requests_ok"] == 0
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert errors == {"timeout: no data for 0.5 s (--read-timeout-s)"}
    post = env.stats.get("/v1/chat/completions", "POST")
    assert 450 <= post.min_response_time <= 1500  # fired after ~0.5 s of silence, not at once


def test_stream_longer_than_request_timeout(tmp_path):
    server = serve(keep_alive_forever)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m", "--read-timeout-s", "5",
                       "--request-timeout-s", "0.8", "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=1, seconds=2.0)
    finally:
        server.stop(timeout=0)
    summary = read_summary(tmp_path)
    assert summary["failures"].get("timeout", 0) >= 1, summary["failures"]
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert errors == {"timeout: request took longer than 0.8 s (--request-timeout-s)"}
