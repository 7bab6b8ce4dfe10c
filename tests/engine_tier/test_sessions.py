"""Multi-turn sessions against llama.cpp's server: every later turn sends the earlier answers exactly as the server
streamed them, and the server's prompt tokens are its count of the templated history.

A recording relay (`recording_relay`) between the client and the server keeps each connection's bytes both ways
(llama.cpp closes the connection after every streamed response: one request per connection). The test decodes the
requests' bodies and the streamed answers from those bytes, and asks the server itself (`/apply-template`,
`/tokenize`) how many tokens each request's messages make. The run is --max-requests long, so every request ends
before the run does.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterator
from urllib.parse import urlsplit

import gevent
import pytest
from gevent import socket as gsocket
from gevent.server import StreamServer

from engine_tier.conftest import run_against

pytestmark = pytest.mark.engine

TURNS = 3
SESSIONS = 3
MAX_TOKENS = 12
PROMPT_TOKENS = 24


@contextlib.contextmanager
def recording_relay(upstream_url: str) -> Iterator[tuple[str, list[tuple[bytearray, bytearray]]]]:
    """A plain TCP relay on 127.0.0.1 in front of `upstream_url`; yields its URL and the list of its connections'
    (bytes sent by the client, bytes sent back), filled as they flow."""
    upstream = urlsplit(upstream_url)
    connections: list[tuple[bytearray, bytearray]] = []

    def relay(source, sink, kept: bytearray) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                kept += data
                sink.sendall(data)

    def handle(client, _address) -> None:
        server = gsocket.create_connection((upstream.hostname, upstream.port))
        sent, received = bytearray(), bytearray()
        connections.append((sent, received))
        pipes = [gevent.spawn(relay, client, server, sent), gevent.spawn(relay, server, client, received)]
        gevent.wait(pipes, count=1)
        gevent.wait(pipes, timeout=2)  # the rest of the other direction
        for sock in (client, server):
            sock.close()
        gevent.killall(pipes)

    listener = StreamServer(("127.0.0.1", 0), handle)
    listener.start()
    try:
        yield f"http://127.0.0.1:{listener.server_port}", connections
    finally:
        listener.stop(timeout=1)


def split_head(data: bytes) -> tuple[dict[str, str], bytes]:
    """An HTTP message's headers (lower-case names) and the bytes after them."""
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}, rest


def dechunked(body: bytes) -> bytes:
    """A chunked transfer-encoded body's content."""
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2 :]
    return bytes(out)


def streamed_answer(data: bytes) -> tuple[str, int]:
    """The content a chat completions stream carried, and its usage.prompt_tokens."""
    headers, body = split_head(data)
    if "chunked" in headers.get("transfer-encoding", ""):
        body = dechunked(body)
    text, prompt_tokens = [], -1
    for line in body.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[len("data: ") :])
        for choice in chunk.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
        if chunk.get("usage"):
            prompt_tokens = chunk["usage"]["prompt_tokens"]
    return "".join(text), prompt_tokens


def test_sessions_send_the_answers_back_as_streamed_and_count_like_the_server(engine, llama, tmp_path):
    with recording_relay(llama.url) as (url, connections):
        run = run_against(
            llama, engine, "chat.py", tmp_path / "run", "--host", url, "-u", str(SESSIONS), "-r", str(SESSIONS),
            "--max-requests", str(SESSIONS * TURNS), "-t", "90s", "--session-turns", str(TURNS),
            "--max-tokens", str(MAX_TOKENS), "--prompt-tokens", str(PROMPT_TOKENS), "--server-family", "llamacpp",
            "--tokenizer", str(engine.tokenizer), "--seed", "2", "--session-header", "X-Session-Id",
            "--extra-body", '{"temperature": 0}',
        )  # fmt: skip
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    assert run.summary["failures"] == {} and run.summary["throughput"]["requests_ok"] == SESSIONS * TURNS
    sessions: dict[str, list[tuple[list[dict], str, int]]] = defaultdict(list)
    for sent, received in connections:
        headers, body = split_head(sent)
        if not body.startswith(b"{"):
            continue  # GET /v1/models
        messages = json.loads(body[: int(headers["content-length"])])["messages"]
        sessions[headers["x-session-id"]].append((messages, *streamed_answer(received)))
    assert sum(map(len, sessions.values())) == SESSIONS * TURNS
    for session, turns in sessions.items():
        for turn, (messages, answer, prompt_tokens) in enumerate(turns, 1):
            assert [m["role"] for m in messages] == ["user", "assistant"] * (turn - 1) + ["user"], session
            if turn > 1:  # the history: the previous request's messages and its answer as streamed, byte for byte
                before, before_answer, _ = turns[turn - 2]
                assert messages[:-1] == [*before, {"role": "assistant", "content": before_answer}], session
            templated = llama.post("/apply-template", {"messages": messages})["prompt"]
            assert prompt_tokens == len(llama.post("/tokenize", {"content": templated})["tokens"]), session
            assert answer, session
    by_turn = {row["label"]: row["requests_ok"] for row in run.summary["breakdowns"]["turn"]}
    assert by_turn == {"1": SESSIONS, "2": SESSIONS, "3-4": SESSIONS}
