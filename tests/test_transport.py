"""Bodies framed in other ways and connections that break, against small servers on loopback."""

from __future__ import annotations

from conftest import options, read_summary, run_local
from test_timeouts import HEADERS, chunk, read_request, serve

EVENTS = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(5)]
DONE = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def close_delimited(sock, _address):
    """HTTP/1.0 style: no chunking, the body ends when the server closes the connection."""
    read_request(sock)
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    for event in EVENTS:
        sock.sendall(event)
    sock.sendall(DONE)
    sock.close()


def cut_mid_stream(sock, _address):
    """Chunked stream that stops after two tokens: the connection closes without the last chunk."""
    read_request(sock)
    sock.sendall(HEADERS + chunk(EVENTS[0]) + chunk(EVENTS[1]))
    sock.close()


def run_against(handler, tmp_path):
    server = serve(handler)
    try:
        opts = options("--host", f"http://127.0.0.1:{server.server_port}", "--model", "m",
                       "--results-dir", str(tmp_path))  # fmt: skip
        env = run_local(opts, users=1, seconds=1.0)
    finally:
        server.stop(timeout=0)
    return env, read_summary(tmp_path)


def test_close_delimited_body_is_a_complete_stream(tmp_path):
    _env, summary = run_against(close_delimited, tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 3
    assert summary["metrics"]["output_tokens"]["max"] == 5  # token events: the server sent no usage
    assert summary["tokens"]["sources"] == {"events": summary["throughput"]["requests_ok"]}


def test_connection_cut_mid_stream_is_a_transport_failure(tmp_path):
    env, summary = run_against(cut_mid_stream, tmp_path)
    assert summary["throughput"]["requests_ok"] == 0 and summary["failures"].get("transport", 0) >= 3
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert errors == {"transport: HTTPConnectionClosed: connection closed before the end of the response"}
