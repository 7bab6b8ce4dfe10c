"""The first-token timeout: a stream that sends bytes (keep-alives, a role-only chunk) but no token."""

from __future__ import annotations

import gevent
import pytest
from conftest import options, read_summary, run_local
from harness.sse_server import HEADERS, chunk, read_request, serve

pytestmark = pytest.mark.alone  # a 0.6 s first-token timeout in a 2 s run


def role_then_keep_alives(sock, _address):
    """The role-only chunk at once, then a keep-alive comment every 100 ms: bytes, never a token."""
    read_request(sock)
    sock.sendall(HEADERS + chunk(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'))
    for _ in range(300):
        sock.sendall(chunk(b": keep-alive\n\n"))
        gevent.sleep(0.1)


def test_no_token_within_the_first_token_timeout(tmp_path):
    server = serve(role_then_keep_alives)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m", "--read-timeout-s", "5",
                       "--first-token-timeout-s", "0.6", "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=2, seconds=2.0)
    finally:
        server.stop(timeout=0)
    summary = read_summary(tmp_path)
    assert set(summary["failures"]) == {"timeout"} and summary["failures"]["timeout"] >= 2
    assert summary["metrics"]["ttft_failed_ms"]["count"] == 0  # no token ever came
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert errors == {"timeout: no token within 0.6 s of sending (--first-token-timeout-s)"}
    post = env.stats.get("/v1/chat/completions", "POST")
    assert 550 <= post.min_response_time <= 1600  # the read timeout (5 s) never fired: bytes kept coming
