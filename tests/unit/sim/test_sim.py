"""The simulator over real loopback sockets: protocol, length rules, ground-truth timing."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from harness.sim_requests import assert_t_recv_is_the_kernel_arrival, chat, trace_record

from llm_locust.sim import SimProcess, run_sim
from llm_locust.transport.kernel_time import KERNEL_TIMESTAMPS

TTFT_MS = 40.0
ITL_MS = 8.0
NATURAL_TOKENS = 6


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", str(NATURAL_TOKENS)) as s:
        yield s


def post(sim: SimProcess, path: str, body: Any, conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    """POST `body` (JSON-encoded unless bytes); return (status, raw body)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read()
    if own:
        conn.close()
    return response.status, payload


def get(sim: SimProcess, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def sse_events(payload: bytes) -> list[Any]:
    """Split an SSE body into decoded `data:` payloads ("[DONE]" kept as a string)."""
    events = []
    for block in payload.decode().split("\n\n"):
        if block:
            assert block.startswith("data: "), block
            data = block[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_streaming_chat_event_sequence(sim: SimProcess) -> None:
    status, payload = post(sim, "/v1/chat/completions", chat(max_tokens=4))
    assert status == 200
    events = sse_events(payload)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    tokens = events[1:5]
    assert all(e["object"] == "chat.completion.chunk" for e in tokens)
    assert all(e["choices"][0]["delta"]["content"].startswith(" ") for e in tokens)
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None, None, None, "length"]
    assert events[5]["choices"] == []
    assert events[5]["usage"] == {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
    assert events[6:] == ["[DONE]"]
    assert len({e["id"] for e in events[:6]}) == 1


def test_each_event_is_its_own_http_chunk(sim: SimProcess) -> None:
    body = json.dumps(chat(max_tokens=3)).encode()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
        )
        raw = b""
        while not raw.endswith(b"\r\n0\r\n\r\n"):
            raw += sock.recv(65536)
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head and b"text/event-stream" in head
    chunks = []
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        chunks.append(rest[:size])
        rest = rest[size + 2 :]
    assert chunks[-1] == b""
    assert all(c.startswith(b"data: ") and c.endswith(b"\n\n") and c.count(b"data: ") == 1 for c in chunks[:-1])
    assert len(chunks) == 1 + 3 + 1 + 1 + 1  # role, tokens, usage, [DONE], terminator


def test_streaming_completions(sim: SimProcess) -> None:
    body = {"model": "llm-locust-sim", "prompt": "a b c", "max_tokens": 3, "stream": True}
    status, payload = post(sim, "/v1/completions", body)
    events = sse_events(payload)
    assert status == 200
    assert [e["object"] for e in events[:-1]] == ["text_completion"] * 3
    assert [e["choices"][0]["finish_reason"] for e in events[:-1]] == [None, None, "length"]
    assert all(e["choices"][0]["text"].startswith(" ") for e in events[:-1])
    assert events[-1] == "[DONE]"  # no usage chunk unless asked for


def test_non_streaming_both_endpoints(sim: SimProcess) -> None:
    status, payload = post(sim, "/v1/chat/completions", chat(max_tokens=3, stream=False))
    result = json.loads(payload)
    assert status == 200 and result["object"] == "chat.completion"
    assert len(result["choices"][0]["message"]["content"].split()) == 3
    assert result["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    status, payload = post(sim, "/v1/completions", {"prompt": ["a b", "c"], "max_tokens": 20})
    result = json.loads(payload)
    assert result["object"] == "text_completion" and result["choices"][0]["finish_reason"] == "stop"
    assert len(result["choices"][0]["text"].split()) == NATURAL_TOKENS
    assert result["usage"]["prompt_tokens"] == 3


@pytest.mark.parametrize(
    ("extra", "tokens", "reason"),
    [
        ({}, NATURAL_TOKENS, "stop"),
        ({"max_tokens": 2}, 2, "length"),
        ({"max_tokens": 10}, NATURAL_TOKENS, "stop"),
        ({"max_tokens": 10, "ignore_eos": True}, 10, "length"),
        ({"max_tokens": 10, "min_tokens": 8}, 8, "stop"),
        ({"max_completion_tokens": 3}, 3, "length"),
    ],
)
def test_length_rules(sim: SimProcess, extra: dict[str, Any], tokens: int, reason: str) -> None:
    _, payload = post(sim, "/v1/chat/completions", chat(stream=False, **extra))
    result = json.loads(payload)
    assert result["usage"]["completion_tokens"] == tokens
    assert result["choices"][0]["finish_reason"] == reason


def test_errors(sim: SimProcess) -> None:
    status, payload = post(sim, "/v1/chat/completions", chat(model="other"))
    assert status == 404
    assert json.loads(payload)["error"]["type"] == "NotFoundError"
    assert json.loads(payload)["error"]["code"] == 404
    status, payload = post(sim, "/v1/chat/completions", b"{not json")
    assert status == 400 and "JSON" in json.loads(payload)["error"]["message"]
    status, payload = get(sim, "/v2/nothing")
    assert status == 404 and json.loads(payload)["error"]["code"] == 404


def test_models_health_metrics(sim: SimProcess) -> None:
    status, payload = get(sim, "/v1/models")
    assert status == 200
    assert [m["id"] for m in json.loads(payload)["data"]] == ["llm-locust-sim"]
    assert get(sim, "/health")[0] == 200
    status, payload = get(sim, "/metrics")
    assert status == 200 and b"vllm:generation_tokens_total" in payload


def test_keep_alive_two_requests_one_connection(sim: SimProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    assert post(sim, "/v1/chat/completions", chat(max_tokens=2), conn)[0] == 200
    first_socket = conn.sock
    assert post(sim, "/v1/completions", {"prompt": "x", "max_tokens": 2}, conn)[0] == 200
    assert conn.sock is first_socket
    conn.close()


def test_reset_without_a_body_clears_the_trace(sim: SimProcess) -> None:
    """`curl -X POST .../sim/reset` sends neither Content-Length nor a body: the trace is cleared (not HTTP 411)."""
    assert post(sim, "/v1/chat/completions", chat())[0] == 200
    assert sim.trace()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as conn:
        conn.sendall(b"POST /sim/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert sim.trace() == []


def test_trace_matches_what_was_received(sim: SimProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(chat(max_tokens=10, ignore_eos=True)))
    response = conn.getresponse()
    arrivals = []
    events = []
    while True:
        line = response.readline()
        if line.startswith(b"data: "):
            arrivals.append(time.perf_counter())
            events.append(line[6:].strip())
        if line.strip() == b"data: [DONE]" or not line:
            break
    conn.close()
    response_id = json.loads(events[0])["id"]
    record = trace_record(sim, response_id)
    times = record["token_times"]
    assert record["completion_tokens"] == len(times) == 10
    assert record["finish_reason"] == "length" and record["stream"] and not record["cancelled"]
    # exact: no token is written before its absolute due time, nothing arrives before it was written;
    # generous: how late (a busy 2-core machine running the whole suite)
    due = [record["t_recv"] + (TTFT_MS + i * ITL_MS) / 1e3 for i in range(10)]
    assert all(0 <= sent - due_s < 0.025 for sent, due_s in zip(times, due, strict=True))
    token_arrivals = arrivals[1:11]  # after the role event
    assert all(0 <= arrival - sent < 0.05 for sent, arrival in zip(times, token_arrivals, strict=True))


@pytest.mark.skipif(not KERNEL_TIMESTAMPS, reason="kernel receive times: Linux only")
def test_t_recv_is_when_the_request_arrived_not_when_the_busy_loop_read_it(sim: SimProcess) -> None:
    assert_t_recv_is_the_kernel_arrival(sim, http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10))


@pytest.mark.skipif(not KERNEL_TIMESTAMPS, reason="kernel receive times: Linux only")
def test_t_recv_is_the_first_byte_and_t_body_the_last(sim: SimProcess) -> None:
    """A request whose body's end comes 0.3 s after its head: `t_recv` is the head's arrival (a server's clock starts
    there), `t_body` the end's, and the simulator's TTFT (first write − t_recv) holds the wait; `parse_s` is its
    decoding of the body; the response head (`t_head`) leaves once the body is whole, before the first token."""
    body = json.dumps(chat(max_tokens=2, ignore_eos=True)).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as conn:
        t_send = time.perf_counter()
        conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        time.sleep(0.3)
        conn.sendall(body[10:])
        response = conn.recv(65536)
        while b"[DONE]" not in response:
            response += conn.recv(65536)
    response_id = json.loads(response.split(b"data: ", 2)[1].split(b"\n", 1)[0])["id"]
    record = trace_record(sim, response_id)
    assert 0 <= record["t_recv"] - t_send < 0.1 and record["t_body"] - record["t_recv"] >= 0.3, record
    assert record["token_times"][0] - record["t_recv"] >= 0.3 and 0 < record["parse_s"] < 0.1, record
    assert record["t_body"] <= record["t_head"] <= record["token_times"][0], record


def test_disconnect_mid_stream_is_cancelled(sim: SimProcess) -> None:
    sim.reset()
    body = json.dumps(chat(max_tokens=200, ignore_eos=True)).encode()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
        )
        received = b""
        while received.count(b"data: ") < 4:
            received += sock.recv(65536)
    time.sleep(0.05)
    (record,) = sim.trace()
    assert record["cancelled"] is True and record["finish_reason"] is None
    assert 3 <= record["completion_tokens"] < 200
    assert post(sim, "/v1/chat/completions", chat(max_tokens=2))[0] == 200


def test_batching_queues_beyond_max_batch() -> None:
    step_s = 0.02  # the two queued requests wait >= 4 steps (80 ms); the first two <= 1 step
    args = ("--timing", "batching", "--max-batch", "2", "--decode-step-ms", str(step_s * 1000))
    with run_sim(*args, "--decode-step-ms-per-seq", "0", "--prefill-us-per-token", "0") as sim:
        results: list[int] = []

        def one() -> None:
            results.append(post(sim, "/v1/completions", {"prompt": "p", "max_tokens": 5, "stream": True})[0])

        threads = [threading.Thread(target=one) for _ in range(4)]
        for thread in threads:
            thread.start()
            time.sleep(0.002)
        for thread in threads:
            thread.join()
        assert results == [200] * 4
        records = sorted(sim.trace(), key=lambda r: r["t_recv"])
    # Two are admitted at once, two wait for a free slot (>= 4 steps). Which two is up to the order the sim accepted
    # them in (threads 2 ms apart may arrive in any order on a loaded machine), so the groups are told apart by their
    # queue time; bounds sit halfway between the model's values, so a loaded 2-core machine's delays don't flip them.
    queued = [r["queue_s"] > 2 * step_s for r in records]
    assert sorted(queued) == [False, False, True, True], [r["queue_s"] for r in records]
    ttfts = {flag: [r["token_times"][0] - r["t_recv"] for r, q in zip(records, queued, strict=True) if q is flag]
             for flag in (False, True)}  # fmt: skip
    assert max(ttfts[False]) + 2 * step_s < min(ttfts[True])
    for record in records:
        gaps = [b - a for a, b in pairwise(record["token_times"])]
        assert all(abs(gap - step_s) < step_s / 2 for gap in gaps)
