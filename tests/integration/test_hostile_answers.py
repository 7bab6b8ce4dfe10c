"""Answers no honest server gives, from small servers on loopback: each fails its request with the reason, and the
run's summary is written (nothing a server sends can crash it)."""

from __future__ import annotations

import gzip
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


def run_against(handler, tmp_path):
    """One user against `handler` until 3 requests finished (--max-requests): a run that ends on its count, not on a
    clock, so a loaded machine makes it longer, never shorter of requests (30 s: only how long to wait for them)."""
    server = serve(handler)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m", "--max-requests", "3",
                       "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=1, seconds=30, until_stopped=True)
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


ENDLESS_BYTES = 20_000_000
"""What the endless-line server sends of one line, without a newline."""
PIECE = b"x" * 65536


def endless_line(chunked: bool, sent: list[int]):
    """A handler answering each request with a stream whose first line never ends (`ENDLESS_BYTES` of it, in 64 KiB
    writes, chunked or delimited by the close); `sent` gets the bytes it could write before the client left."""

    def handler(sock, _address):
        read_request(sock)
        head = (
            HEADERS if chunked else b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )
        written = 0
        try:
            sock.sendall(head + (chunk(b"data: ") if chunked else b"data: "))
            while written < ENDLESS_BYTES:
                sock.sendall(chunk(PIECE) if chunked else PIECE)
                written += len(PIECE)
        except OSError:  # the client closed the connection
            pass
        sent.append(written)
        sock.close()

    return handler


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "close-delimited"])
def test_a_line_without_end_fails_at_once_as_a_bad_stream(tmp_path, chunked):
    sent: list[int] = []
    env, summary = run_against(endless_line(chunked, sent), tmp_path)
    failed = summary["throughput"]["requests_failed"]
    assert failed >= 2 and summary["failures"] == {"bad_stream": failed}
    (error,) = {str(e.error) for e in env.stats.errors.values()}
    assert error == "bad_stream: a line over 4,194,304 bytes (--max-event-bytes)"
    # the client read past the bound and closed: the server could not write the rest (kernel buffers hold a few MB)
    assert sent and all(written < ENDLESS_BYTES * 0.75 for written in sent), sent


def gzipped(sock, _address):
    """A stream gzip-encoded although the client asked for `Accept-Encoding: identity`."""
    body = gzip.compress(TOKEN + b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    while read_request(sock):
        sock.sendall(HEADERS.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n") + chunk(body) + b"0\r\n\r\n")


def test_a_gzip_stream_not_asked_for_is_a_bad_stream(tmp_path):
    env, summary = run_against(gzipped, tmp_path)
    failed = summary["throughput"]["requests_failed"]
    assert failed >= 2 and summary["failures"] == {"bad_stream": failed}
    (error,) = {str(e.error) for e in env.stats.errors.values()}
    assert error == "bad_stream: the stream is gzip-encoded, not asked for (Accept-Encoding: identity)"
