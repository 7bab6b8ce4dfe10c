"""Answers no honest server gives, from small servers on loopback: each fails its request with the reason, and the
run's summary is written (nothing a server sends can crash it)."""

from __future__ import annotations

import json

import pytest
from conftest import options, read_summary, run_local
from harness.sse_server import HEADERS, chunk, read_request, serve

from llm_locust.metrics.protocol import MAX_USAGE_TOKENS

TOKEN = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'


def usage_of(completion_tokens: int):
    """A handler answering every request with two tokens, then usage counting `completion_tokens`, then [DONE]."""
    usage = {"prompt_tokens": 5, "completion_tokens": completion_tokens, "total_tokens": 5 + completion_tokens}
    last = b"data: " + json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": usage}).encode()

    def handler(sock, _address):
        while read_request(sock):
            sock.sendall(HEADERS + chunk(TOKEN) + chunk(TOKEN) + chunk(last + b"\n\n") + chunk(b"data: [DONE]\n\n"))
            sock.sendall(b"0\r\n\r\n")

    return handler


def run_against(handler, tmp_path, seconds: float = 1.5):
    server = serve(handler)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m",
                       "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=1, seconds=seconds)
    finally:
        server.stop(timeout=0)
    return env, read_summary(tmp_path)


@pytest.mark.parametrize("completion_tokens", [2**63 - 1, 10**15, MAX_USAGE_TOKENS + 1])
def test_implausible_usage_is_a_bad_stream_and_the_summary_is_written(tmp_path, completion_tokens):
    env, summary = run_against(usage_of(completion_tokens), tmp_path)
    failed = summary["throughput"]["requests_failed"]
    assert failed >= 3 and summary["failures"] == {"bad_stream": failed}
    assert summary["throughput"]["requests_ok"] == 0 and summary["verdict"]["passed"] is False
    (error,) = {str(e.error) for e in env.stats.errors.values()}
    assert error == (f"bad_stream: usage counts {completion_tokens} output tokens: not plausible for one request "
                     f"(at most {MAX_USAGE_TOKENS:,})")  # fmt: skip


def test_usage_at_the_bound_counts(tmp_path):
    _env, summary = run_against(usage_of(MAX_USAGE_TOKENS), tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 3
    assert summary["metrics"]["output_tokens"]["max"] == pytest.approx(MAX_USAGE_TOKENS, rel=0.002)
