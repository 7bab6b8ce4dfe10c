"""Bodies framed in other ways and connections that break, against small servers on loopback."""

from __future__ import annotations

import contextlib
import ssl

import gevent
import greenlet
import pytest
import trustme
from conftest import options, read_summary, run_local
from gevent import socket as gsocket
from gevent.monkey import get_original
from gevent.server import StreamServer
from harness.sse_server import HEADERS, chunk, read_request, serve

from llm_locust.transport import byte_arrival, pump
from llm_locust.transport.kernel_time import KERNEL_TIMESTAMPS
from llm_locust.transport.patches import pooled_socket_alive

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


blocking_sleep = get_original("time", "sleep")  # time.sleep is gevent's under Locust


def first_token_with_head_then_busy(sock, _address):
    """The head and the first token in one write, then the process is busy for 0.2 s (a blocking
    sleep: no greenlet runs, the client's read of them waits), then the rest once it has read them."""
    while read_request(sock):
        sock.sendall(HEADERS + chunk(EVENTS[0]))
        blocking_sleep(0.2)
        gevent.sleep(0.1)  # the client reads the head and the token now, 0.2 s after they arrived
        sock.sendall(b"".join(chunk(e) for e in [*EVENTS[1:], DONE]) + b"0\r\n\r\n")


def token_then_busy(sock, _address):
    """The head, then a token, then the process busy for 0.2 s (the pump cannot read the token),
    then 0.05 s later the next tokens: true gaps 0.25 s, then ~0."""
    while read_request(sock):
        sock.sendall(HEADERS)
        gevent.sleep(0.05)  # the head is read, the stream is with the pump
        sock.sendall(chunk(EVENTS[0]))
        blocking_sleep(0.2)
        gevent.sleep(0.05)  # the pump reads the token now, 0.2 s after it arrived
        sock.sendall(b"".join(chunk(e) for e in [*EVENTS[1:], DONE]) + b"0\r\n\r\n")


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


@pytest.mark.skipif(not KERNEL_TIMESTAMPS, reason="kernel receive times: Linux only")
def test_a_token_read_with_the_head_has_its_kernel_receive_time(tmp_path):
    """TTFT is when the token reached the host, not when the late greenlet read it (0.2 s later)."""
    _env, summary = run_against(first_token_with_head_then_busy, tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 2
    assert summary["metrics"]["ttft_ms"]["max"] < 50  # the head and the token were sent at once
    assert summary["metrics"]["e2e_ms"]["min"] >= 300  # the rest came after the busy 0.2 s and 0.1 s


@pytest.mark.alone  # a kernel receive time within 100 ms
@pytest.mark.skipif(not KERNEL_TIMESTAMPS, reason="kernel receive times: Linux only")
def test_a_token_read_late_by_the_pump_has_its_kernel_receive_time(tmp_path):
    """The first gap is 0.25 s (when the tokens arrived), not 0.05 s (when they were read)."""
    _env, summary = run_against(token_then_busy, tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 2
    assert summary["metrics"]["itl_ms"]["max"] >= 240  # 0.25 s: the token's arrival, not its late read
    assert summary["metrics"]["ttft_ms"]["max"] < 100  # 0.05 s after the head


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
    """TLS sockets have no recvmsg: the body is read and timed by plain reads (the server's
    certificate verified, its throw-away CA trusted with --ca-bundle)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server = StreamServer(("127.0.0.1", 0), tls_stream, ssl_context=server_context(ca))
    server.start()
    results = tmp_path / "results"
    try:
        opts = options("--host", f"https://127.0.0.1:{server.server_port}", "--model", "m",
                       "--ca-bundle", str(tmp_path / "ca.pem"), "--results-dir", str(results))  # fmt: skip
        run_local(opts, users=1, seconds=1.0)
    finally:
        server.stop(timeout=0)
    summary = read_summary(results)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 3
    assert summary["metrics"]["output_tokens"]["max"] == 5


@pytest.mark.alone  # TTFT/ITL p50 within 5 / 2 ms
def test_plain_read_timing_is_accurate_at_low_load(fast_sim, tmp_path, monkeypatch):
    """Where the kernel gives no timestamps (non-Linux), events are timed when read."""
    monkeypatch.setattr(byte_arrival, "KERNEL_TIMESTAMPS", False)
    opts = options("--host", fast_sim.url, "--max-tokens", "16", "--ignore-eos", "--results-dir", str(tmp_path))
    run_local(opts, users=2, seconds=2.0)
    m = read_summary(tmp_path)["metrics"]
    assert abs(m["ttft_ms"]["p50"] - 20) <= 5 and abs(m["itl_ms"]["p50"] - 5) <= 2, m


def test_pooled_keep_alive_check_answers_without_switching_greenlets():
    """geventhttpclient checks an idle pooled socket before reusing it; ours must not yield to the
    hub (gevent's select did, so other greenlets ran between a request's t_send and its send)."""
    listener = gsocket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = gsocket.create_connection(listener.getsockname())
    server, _ = listener.accept()

    def check_without_switch() -> bool:
        switches: list[str] = []
        previous = greenlet.settrace(lambda event, _args: switches.append(event))
        try:
            alive = pooled_socket_alive(None, client)
        finally:
            greenlet.settrace(previous)
        assert switches == []
        return alive

    assert check_without_switch()  # idle: nothing to read
    server.sendall(b"unexpected")  # a readable idle socket is dirty
    gevent.sleep(0.05)
    assert not check_without_switch()
    server.close()
    gevent.sleep(0.05)
    assert not pooled_socket_alive(None, client)  # the peer closed: readable (EOF)
    client.close()
    assert not pooled_socket_alive(None, client) and not pooled_socket_alive(None, None)
    listener.close()


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    """A server-side TLS context with a certificate for 127.0.0.1 issued by `ca`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


# -- TLS read by the pump: the raw socket's kernel receive times, decrypted in memory ----------------------------------
class ServerTLS:
    """The server's side of a TLS connection over a raw socket, decrypted in memory, so that a test can cut or
    spoil its records on the wire."""

    def __init__(self, sock, context: ssl.SSLContext) -> None:
        self.sock, self.incoming, self.outgoing = sock, ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                if not data:  # the client left mid-handshake (a user stopped): reading on would spin the hub
                    raise ConnectionResetError("the client closed during the TLS handshake") from None
                self.incoming.write(data)
        self.sock.sendall(self.outgoing.read())

    @classmethod
    def accept(cls, sock, context: ssl.SSLContext) -> ServerTLS | None:
        """The server's side of a new connection, or None if the client closed before the handshake ended."""
        try:
            return cls(sock, context)
        except ConnectionResetError:
            sock.close()
            return None

    def recv(self, size: int) -> bytes:
        while True:
            try:
                return self.tls.read(size)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                if not data:
                    return b""
                self.incoming.write(data)
            except ssl.SSLError:  # the client closed
                return b""

    def records(self, data: bytes) -> bytes:
        """`data` as TLS records, not sent."""
        self.tls.write(data)
        return self.outgoing.read()

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(self.records(data))

    def close_notify(self) -> None:
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.unwrap()
        self.sock.sendall(self.outgoing.read())


def tls_handler(ending):
    """A StreamServer handler: TLS in memory, one request's head and two tokens, then `ending(tls)`."""

    def handle(sock, _address):
        tls = ServerTLS.accept(sock, TLS_CONTEXT[0])
        if tls and read_request(tls):
            tls.sendall(HEADERS + chunk(EVENTS[0]) + chunk(EVENTS[1]))
            ending(tls)
            gevent.sleep(0.05)
        sock.close()

    return handle


def cut(tls: ServerTLS) -> None:
    """The connection closes (no close_notify) after whole records."""


def truncated(tls: ServerTLS) -> None:
    """The next record only in part, then the connection closes."""
    tls.sock.sendall(tls.records(chunk(EVENTS[2]))[:-5])


def bad_record(tls: ServerTLS) -> None:
    """A record whose authentication tag is spoilt: the client's TLS rejects it."""
    wire = bytearray(tls.records(chunk(EVENTS[2])))
    wire[-1] ^= 0xFF
    tls.sock.sendall(bytes(wire))


def close_notify(tls: ServerTLS) -> None:
    tls.close_notify()


def tls_token_then_busy(sock, _address):
    """`token_then_busy` over TLS (its reads by the pump: true gaps 0.25 s, then ~0)."""
    tls = ServerTLS.accept(sock, TLS_CONTEXT[0])
    while tls and read_request(tls):
        tls.sendall(HEADERS)
        gevent.sleep(0.05)
        tls.sendall(chunk(EVENTS[0]))
        blocking_sleep(0.2)
        gevent.sleep(0.05)
        tls.sendall(b"".join(chunk(e) for e in [*EVENTS[1:], DONE]) + b"0\r\n\r\n")


def tls_close_delimited(sock, _address):
    """`close_delimited` over TLS, the body ended by close_notify."""
    tls = ServerTLS.accept(sock, TLS_CONTEXT[0])
    if tls is None:
        return
    read_request(tls)
    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    for event in [*EVENTS, DONE]:
        tls.sendall(event)
        gevent.sleep(0.002)
    tls.close_notify()
    gevent.sleep(0.05)
    sock.close()


TLS_CONTEXT: list[ssl.SSLContext] = []  # the server's context of the running test (`run_tls_against`)


def run_tls_against(handler, tmp_path):
    """`run_against` over TLS (a throw-away CA trusted with --ca-bundle); also how many reads the pump did."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    TLS_CONTEXT[:] = [server_context(ca)]
    server = serve(handler)
    the_pump = pump.pump()
    reads_before = the_pump.reads
    try:
        opts = options("--host", f"https://127.0.0.1:{server.server_port}", "--model", "m",
                       "--ca-bundle", str(tmp_path / "ca.pem"), "--results-dir", str(tmp_path / "r"))  # fmt: skip
        env = run_local(opts, users=1, seconds=1.0)
    finally:
        server.stop(timeout=0)
    return env, read_summary(tmp_path / "r"), the_pump.reads - reads_before


@pytest.mark.skipif(not KERNEL_TIMESTAMPS, reason="kernel receive times: Linux only")
def test_https_token_read_late_by_the_pump_has_its_kernel_receive_time(tmp_path):
    """Over TLS as over plain TCP: the first gap is 0.25 s (when the records arrived), not 0.05 s (when read)."""
    _env, summary, reads = run_tls_against(tls_token_then_busy, tmp_path)
    ok = summary["throughput"]["requests_ok"]
    assert summary["failures"] == {} and ok >= 2
    assert summary["metrics"]["itl_ms"]["max"] >= 240
    assert summary["metrics"]["ttft_ms"]["max"] < 100
    assert reads >= 2 * ok  # the pump read the streams


def test_https_close_delimited_body_ends_at_close_notify(tmp_path):
    _env, summary, _reads = run_tls_against(tls_close_delimited, tmp_path)
    assert summary["failures"] == {} and summary["throughput"]["requests_ok"] >= 3
    assert summary["metrics"]["output_tokens"]["max"] == 5


@pytest.mark.parametrize(
    ("ending", "message"),
    [
        (cut, "HTTPConnectionClosed: the connection closed without TLS close_notify before the end of the response"),
        (truncated, "HTTPConnectionClosed: the connection closed without TLS close_notify before the end of the"),
        (close_notify, "HTTPConnectionClosed: the server ended TLS (close_notify) before the end of the response"),
        (bad_record, "SSLError: [SSL: "),
    ],
)  # fmt: skip
def test_https_stream_ended_mid_response_is_a_transport_failure_with_its_reason(tmp_path, ending, message):
    env, summary, _reads = run_tls_against(tls_handler(ending), tmp_path)
    assert summary["throughput"]["requests_ok"] == 0 and summary["failures"].get("transport", 0) >= 2, summary
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert errors and all(error.startswith(f"transport: {message}") for error in errors), errors
