"""Bodies framed in other ways and connections that break, against small servers on loopback."""

from __future__ import annotations

import subprocess

import gevent
from conftest import options, read_summary, run_local
from gevent.server import StreamServer
from test_timeouts import HEADERS, chunk, read_request, serve

from llm_locust import arrival

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


def all_at_once(sock, _address):
    """Whole responses in one write each (they arrive together with the headers), keep-alive."""
    while read_request(sock):
        sock.sendall(HEADERS + b"".join(chunk(e) for e in [*EVENTS, DONE]) + b"0\r\n\r\n")


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


def test_response_that_arrives_with_its_headers(tmp_path):
    _env, summary = run_against(all_at_once, tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 3
    assert summary["metrics"]["output_tokens"]["max"] == 5


def test_connection_cut_mid_stream_is_a_transport_failure(tmp_path):
    env, summary = run_against(cut_mid_stream, tmp_path)
    assert summary["throughput"]["requests_ok"] == 0 and summary["failures"].get("transport", 0) >= 3
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert errors == {"transport: HTTPConnectionClosed: connection closed before the end of the response"}


def tls_stream(sock, _address):
    """Complete chunked SSE responses, over TLS, on a keep-alive connection."""
    while read_request(sock):
        sock.sendall(HEADERS)
        for event in [*EVENTS, DONE]:
            sock.sendall(chunk(event))
            gevent.sleep(0.002)
        sock.sendall(b"0\r\n\r\n")


def test_https_stream_reads_without_kernel_timestamps(tmp_path):
    """TLS sockets have no recvmsg: the body is read and timed by plain reads."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)  # fmt: skip
    server = StreamServer(("127.0.0.1", 0), tls_stream, certfile=str(cert), keyfile=str(key))
    server.start()
    results = tmp_path / "results"
    try:
        opts = options(
            "--host", f"https://127.0.0.1:{server.server_port}", "--model", "m", "--results-dir", str(results)
        )
        run_local(opts, users=1, seconds=1.0)
    finally:
        server.stop(timeout=0)
    summary = read_summary(results)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 3
    assert summary["metrics"]["output_tokens"]["max"] == 5


def test_plain_read_timing_is_accurate_at_low_load(fast_sim, tmp_path, monkeypatch):
    """Where the kernel gives no timestamps (non-Linux), events are timed when read."""
    monkeypatch.setattr(arrival, "KERNEL_TIMESTAMPS", False)
    opts = options("--host", fast_sim.url, "--max-tokens", "16", "--ignore-eos", "--results-dir", str(tmp_path))
    run_local(opts, users=2, seconds=2.0)
    m = read_summary(tmp_path)["metrics"]
    assert abs(m["ttft_ms"]["p50"] - 20) <= 5 and abs(m["itl_ms"]["p50"] - 5) <= 2, m
