"""The simulator's Gemini streamGenerateContent over real loopback sockets: both of Google's paths, the events (CRLF,
no `[DONE]`, usageMetadata last), what it refuses as Google does, and the `x-goog-api-key` check."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from llm_locust.sim import SimProcess, run_sim

KEY = "AIza-sim-test-key-0001"
GEMINI = "/v1beta/models/llm-locust-sim:streamGenerateContent?alt=sse"
VERTEX = "/v1/projects/p-1/locations/us-central1/publishers/google/models/llm-locust-sim:streamGenerateContent?alt=sse"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "6", "--api-key", KEY) as s:
        yield s


def post(sim: SimProcess, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """POST `body` as JSON to `path` with `headers` (default: the key in x-goog-api-key); (status, raw body)."""
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    sent = {"x-goog-api-key": KEY} if headers is None else headers
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json", **sent})
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, payload


def request(max_tokens: int | None = None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "one two three"}]}],
                            "systemInstruction": {"parts": [{"text": "be brief"}]}, **fields}  # fmt: skip
    if max_tokens is not None:
        body["generationConfig"] = {"maxOutputTokens": max_tokens}
    return body


@pytest.mark.parametrize(("path", "auth"), [(GEMINI, None), (VERTEX, {"Authorization": f"Bearer {KEY}"})])
def test_events_at_both_paths(sim, path, auth):
    status, payload = post(sim, path, request(4), auth)
    assert status == 200 and payload.endswith(b"\r\n\r\n") and b"[DONE]" not in payload
    blocks = payload.split(b"\r\n\r\n")[:-1]
    events = [json.loads(block.removeprefix(b"data: ")) for block in blocks]
    assert len(events) == 5 and len({e["responseId"] for e in events}) == 1
    texts = [e["candidates"][0]["content"]["parts"][0]["text"] for e in events]
    assert all(text.startswith(" ") for text in texts[:4]) and texts[4] == ""
    assert [e["candidates"][0].get("finishReason") for e in events] == [None] * 4 + ["MAX_TOKENS"]
    assert [("usageMetadata" in e) for e in events] == [False] * 4 + [True]
    assert events[4]["usageMetadata"] == {"promptTokenCount": 5, "candidatesTokenCount": 4, "totalTokenCount": 9}
    assert events[0]["modelVersion"] == "llm-locust-sim"
    _status, trace = get(sim, "/sim/trace")
    record = json.loads(trace)[-1]
    assert record["endpoint"] == "gemini" and record["model"] == "llm-locust-sim" and len(record["token_times"]) == 4


def test_natural_length_stops_with_stop(sim):
    status, payload = post(sim, GEMINI, request())
    last = json.loads(payload.split(b"\r\n\r\n")[-2].removeprefix(b"data: "))
    assert status == 200 and last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"]["candidatesTokenCount"] == 6


@pytest.mark.parametrize(("path", "body", "status", "needle"), [
    (GEMINI, {**request(4), "model": "llm-locust-sim"}, 400, 'Unknown name \\"model\\"'),
    (GEMINI, {**request(4), "stream": True}, 400, 'Unknown name \\"stream\\"'),
    (GEMINI, {"contents": []}, 400, "contents is not specified"),
    (GEMINI, {"contents": [{"role": "user", "parts": "x"}]}, 400, "list of parts"),
    (GEMINI.replace("?alt=sse", ""), request(4), 400, "alt=sse"),
    (GEMINI.replace("llm-locust-sim", "other"), request(4), 404, "other"),
])  # fmt: skip
def test_requests_google_refuses_are_refused(sim, path, body, status, needle):
    got, payload = post(sim, path, body)
    assert got == status and needle in payload.decode()


def test_the_api_key_is_checked(sim):
    status, payload = post(sim, GEMINI, request(2), {"x-goog-api-key": KEY + "x"})
    assert status == 400 and "API key not valid" in payload.decode()
    status, _ = post(sim, GEMINI, request(2), {})
    assert status == 401


def get(sim: SimProcess, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()
