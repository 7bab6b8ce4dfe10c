"""The Realtime API over WebSocket: the simulator's session over a real loopback socket (handshake, events, the turn's
timing and trace, usage, refusals), and the client's reading of a turn's events (pure)."""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from harness.sim_socket import SimSocket
from wsproto.events import AcceptConnection, RejectConnection, RejectData, TextMessage

from llm_locust.apis import realtime
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.sim import SimProcess, run_sim

KEY = "sk-realtime-test"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "6", "--api-key", KEY) as s:
        yield s


class Client(SimSocket):
    """The simulator's WebSocket (`handshake`: its answer); `send(kind, **fields)` one client event."""

    def __init__(self, port: int, target: str = "/v1/realtime?model=llm-locust-sim", key: str = KEY) -> None:
        super().__init__(port, target, key)

    def send(self, kind: str, **fields: Any) -> None:
        self.send_text({"type": kind, **fields})


def trace(sim: SimProcess) -> list[dict[str, Any]]:
    return [record for record in sim.trace() if record["endpoint"] == "realtime"]


def user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_session_of_turns(sim):
    client = Client(sim.port)
    assert isinstance(client.handshake, AcceptConnection)
    created = client.event()
    assert created["type"] == "session.created" and created["session"]["model"] == "llm-locust-sim"
    session_id = created["session"]["id"]
    client.send("session.update", session={"type": "realtime", "instructions": "be brief", "max_output_tokens": 4})
    assert client.event()["session"]["max_output_tokens"] == 4
    answers = []
    for turn, words in enumerate(["one two three", "four five"]):
        client.send("conversation.item.create", item=user_text(words))
        added = client.event()
        assert added["type"] == "conversation.item.added" and added["item"]["content"][0]["text"] == words
        client.send("response.create", response={"max_output_tokens": 3} if turn else {})
        events = client.until("response.done")
        kinds = [event["type"] for event in events]
        deltas = [event for event in events if event["type"] == "response.output_text.delta"]
        n = 4 if turn == 0 else 3
        assert kinds == ["response.created", "response.output_item.added", "response.content_part.added"] + [
            "response.output_text.delta"
        ] * n + ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                 "response.done"]  # fmt: skip
        done = events[-1]["response"]
        text = "".join(delta["delta"] for delta in deltas)
        assert events[-4]["text"] == text and done["output"][0]["content"][0]["text"] == text
        assert done["status"] == "incomplete" and done["status_details"]["reason"] == "max_output_tokens"
        assert {delta["response_id"] for delta in deltas} == {done["id"]}
        assert len({event["event_id"] for event in events}) == len(events)
        answers.append(text)
        # the prompt: every item before (the instructions, the user's words, the earlier answers)
        prompt = 2 + 3 + (0 if turn == 0 else len(answers[0].split()) + 2)
        assert done["usage"] == {"input_tokens": prompt, "output_tokens": n, "total_tokens": prompt + n}
    client.close()
    records = trace(sim)[-2:]
    assert [len(record["token_times"]) for record in records] == [4, 3]
    assert {record["session"] for record in records} == {session_id}
    for record in records:  # the fixed timing: token k due 20 + 5k ms after the response.create's arrival — never
        # sooner; later by at most 0.25 s (a loaded machine delays its timers; a late token's successors already due go
        # out with it, as the simulator schedules at absolute times: CI saw tokens 0 and 1 written together)
        late_s = [t - record["t_recv"] - (0.020 + 0.005 * k) for k, t in enumerate(record["token_times"])]
        assert all(-0.0005 < late < 0.25 for late in late_s), late_s
        assert record["finish_reason"] == "length" and not record["cancelled"]


def test_audio_is_an_item_of_its_seconds(sim):
    client = Client(sim.port)
    client.event()  # session.created
    second = base64.b64encode(bytes(48_000)).decode()
    for _ in range(2):
        client.send("input_audio_buffer.append", audio=second)
    client.send("input_audio_buffer.commit")
    assert client.event()["type"] == "input_audio_buffer.committed"
    client.send("response.create")
    done = client.until("response.done")[-1]["response"]
    assert done["usage"]["input_tokens"] == 2 and done["status"] == "completed"
    client.close()


def test_refusals_are_error_events_and_the_session_goes_on(sim):
    client = Client(sim.port)
    client.event()
    for event in ({"type": "nope"}, {"type": "session.update", "session": {"max_output_tokens": 0}}):
        client.sock.sendall(client.ws.send(TextMessage(data=json.dumps(event))))
        error = client.event()
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    client.sock.sendall(client.ws.send(TextMessage(data="{not json")))
    assert "not valid JSON" in client.event()["error"]["message"]
    client.send("conversation.item.create", item=user_text("hello"))
    client.event()
    client.send("response.create")
    client.send("response.create")  # one at a time
    events = client.until("response.done")
    assert [e["error"]["code"] for e in events if e["type"] == "error"] == ["conversation_already_has_active_response"]
    client.close()


@pytest.mark.parametrize(
    ("target", "key", "status"),
    [
        ("/v1/realtime?model=llm-locust-sim", "wrong", 401),
        ("/v1/realtime?model=no-such-model", KEY, 404),
    ],
)
def test_the_handshake_is_refused_as_http(sim, target, key, status):
    client = Client(sim.port, target, key)
    assert isinstance(client.handshake, RejectConnection) and client.handshake.status_code == status
    assert isinstance(client.next_event(), RejectData)


def test_a_plain_request_is_told_to_upgrade(sim):
    for method in ("GET", "POST"):
        conn = socket.create_connection(("127.0.0.1", sim.port), timeout=10)
        conn.sendall(f"{method} /v1/realtime HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                     f"Content-Length: 0\r\n\r\n".encode())  # fmt: skip
        assert conn.recv(65536).startswith(b"HTTP/1.1 426 ")
        conn.close()


def test_a_client_gone_mid_turn_is_traced_cancelled(sim):
    client = Client(sim.port)
    client.event()
    client.send("response.create", response={"max_output_tokens": 200})
    client.until("response.output_text.delta")
    client.sock.close()
    deadline = time.monotonic() + 5
    while not any(record["cancelled"] for record in trace(sim)) and time.monotonic() < deadline:
        time.sleep(0.02)
    cancelled = [record for record in trace(sim) if record["cancelled"]]
    assert len(cancelled) == 1 and 1 <= len(cancelled[0]["token_times"]) < 200


def applied(*events: Any) -> tuple[RequestRecord, list[bool]]:
    """A record with `events` (objects, or raw bytes) applied at t = 1, 2, ...; whether each ended the turn."""
    record = RequestRecord("realtime", 0.0)
    ends = [
        realtime.apply_event(record, event if isinstance(event, bytes) else json.dumps(event).encode(), float(t))
        for t, event in enumerate(events, 1)
    ]
    return record, ends


def delta(text: str, kind: str = "response.output_text.delta") -> dict[str, Any]:
    return {"type": kind, "response_id": "resp-1", "item_id": "i", "output_index": 0, "content_index": 0, "delta": text}


def done(status: str = "completed", reason: str | None = None) -> dict[str, Any]:
    details = {"type": status, "reason": reason} if reason else None
    usage = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    return {"type": "response.done", "response": {"id": "resp-1", "status": status, "status_details": details,
                                                  "usage": usage}}  # fmt: skip


def test_deltas_are_the_turns_tokens_and_done_its_end():
    record, ends = applied({"type": "session.created", "session": {}}, {"type": "response.created",
                           "response": {"id": "resp-1"}}, delta("a"), delta(""), delta(" b", "response.text.delta"),
                           delta(" c"), done())  # fmt: skip
    assert ends == [False] * 6 + [True]
    assert record.t_first == 3.0 and record.t_last == 6.0 and record.events == 3 and list(record.itl_us) == [2e6, 1e6]
    assert record.server_request_id == "resp-1" and record.usage_completion_tokens == 3 and record.prompt_tokens == 7
    assert record.saw_done and record.finish_reason == "stop" and record.ok


def test_cut_at_max_output_tokens_is_length_and_failures_are_failures():
    record, _ = applied(delta("a"), done("incomplete", "max_output_tokens"))
    assert record.ok and record.finish_reason == "length"
    record, ends = applied(delta("a"), {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}})
    assert ends == [False, True] and record.error_kind is ErrorKind.STREAM_ERROR and "no" in record.error_message
    record, _ = applied(delta("a"), done("failed", "turn_detected"))
    assert record.error_kind is ErrorKind.STREAM_ERROR


@pytest.mark.parametrize(
    "event", [b"{not json", b"[1, 2]", {"type": "response.done", "response": "x"}, {"type": "response.done"}]
)
def test_a_hostile_event_fails_the_turn_and_ends_it(event):
    record, ends = applied(event)
    assert ends == [True] and record.error_kind is ErrorKind.BAD_STREAM


def test_a_turns_events_and_text():
    assert realtime.turn({"text": "hi", "max_output_tokens": 5}) == [
        {"type": "conversation.item.create",
         "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"type": "response.create", "response": {"max_output_tokens": 5}},
    ]  # fmt: skip
    assert realtime.turn({}) == [{"type": "response.create", "response": {}}]  # text or audio: the session's
    with pytest.raises(TypeError, match="temperature"):
        realtime.turn({"text": "hi", "temperature": 1})
    assert realtime.event_text(delta("x")) == "x" and realtime.event_text(done()) is None
    assert realtime.API.mount == "realtime.connect" and realtime.API.user == ""


def test_audio_goes_in_chunks_of_a_tenth_of_a_second_paced_by_its_seconds():
    pcm = bytes(range(256)) * 47  # 12032 bytes: 0.2507 s of 24 kHz 16-bit audio
    events = realtime.turn({"audio": pcm, "text": "and this?"})
    kinds = [event["type"] for event in events]
    assert kinds == ["input_audio_buffer.append"] * 3 + ["input_audio_buffer.commit", "conversation.item.create",
                                                          "response.create"]  # fmt: skip
    assert b"".join(base64.b64decode(event["audio"]) for event in events[:3]) == pcm
    seconds = [realtime.audio_seconds(event) for event in events]
    assert seconds[:2] == [0.1, 0.1] and seconds[3:] == [0.0] * 3
    assert sum(seconds) == pytest.approx(len(pcm) / 48_000) and realtime.API.pace is realtime.audio_seconds
    for size in (1, 2, 3, 4800, 4801):  # base64's padding
        assert sum(map(realtime.audio_seconds, realtime.audio_events(bytes(size)))) * 48_000 == pytest.approx(size)


def test_an_answer_in_audio(sim):
    """`output_modalities: ["audio"]` (the session's, or one response's): per token its transcript's delta and 0.1 s
    of 24 kHz pcm in one write, at the text's timing; `response.done` names the format; the trace holds the audio."""
    client = Client(sim.port)
    client.event()
    client.send("session.update", session={"type": "realtime", "output_modalities": ["audio"]})
    assert client.event()["session"]["output_modalities"] == ["audio"]
    for response in ({"max_output_tokens": 4}, {"max_output_tokens": 3, "output_modalities": ["text"]}):
        client.send("response.create", response=response)
        events = client.until("response.done")
        kinds = [event["type"] for event in events]
        done = events[-1]["response"]
        if "output_modalities" in response:  # this response only: text
            assert "response.output_audio.delta" not in kinds and "output_modalities" not in done
            continue
        assert kinds == ["response.created", "response.output_item.added", "response.content_part.added"] + [
            "response.output_audio_transcript.delta", "response.output_audio.delta"] * 4 + [
            "response.output_audio.done", "response.output_audio_transcript.done", "response.content_part.done",
            "response.output_item.done", "response.done"]  # fmt: skip
        audio = [base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta"]
        assert audio == [bytes(4800)] * 4
        transcript = "".join(e["delta"] for e in events if e["type"] == "response.output_audio_transcript.delta")
        assert events[-4]["transcript"] == transcript == done["output"][0]["content"][0]["transcript"]
        assert done["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24_000}
        assert done["usage"]["output_token_details"] == {"text_tokens": 0, "audio_tokens": 4}
    client.close()
    audio_record, text_record = trace(sim)[-2:]
    assert audio_record["answer"] == {"kind": "audio", "audio_s": 0.4, "format": "audio/pcm", "audio_bytes": 19_200}
    assert text_record["answer"] is None
    times = audio_record["token_times"]
    assert len(times) == 4 and 0.0195 < times[0] - audio_record["t_recv"] < 0.27  # (at most 0.25 s late: as above)


def test_audio_it_does_not_write_is_refused(sim):
    client = Client(sim.port)
    client.event()
    pcmu = {"output": {"format": {"type": "audio/pcmu"}}}
    for event in ({"type": "session.update", "session": {"audio": pcmu}},
                  {"type": "response.create", "response": {"output_modalities": ["text", "audio"]}}):  # fmt: skip
        client.send(event.pop("type"), **event)
        error = client.event()
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error", error
    client.close()


def audio_delta(pcm: bytes, kind: str = "response.output_audio.delta") -> dict[str, Any]:
    return delta(base64.b64encode(pcm).decode(), kind)


def test_audio_deltas_are_the_outputs_and_their_seconds_the_answers():
    transcript = delta("hi", "response.output_audio_transcript.delta")
    done_pcm = done()
    record, ends = applied(transcript, audio_delta(bytes(4800)), audio_delta(b""), transcript,
                           audio_delta(bytes(2400), "response.audio.delta"), {"type": "response.output_audio.done"},
                           done_pcm)  # fmt: skip
    assert ends == [False] * 6 + [True] and record.ok
    assert record.t_first == 2.0 and record.t_last == 5.0 and record.events == 2 and list(record.itl_us) == [3e6]
    assert record.output_bytes == 7200 and record.output_s == pytest.approx(0.15)
    assert realtime.event_text(transcript) == "hi" and realtime.event_text(audio_delta(b"x")) is None
    g711 = done()
    g711["response"]["audio"] = {"output": {"format": {"type": "audio/pcmu"}}}
    record, _ = applied(audio_delta(bytes(800)), g711)
    assert record.output_s == pytest.approx(0.1)
    g711["response"]["audio"] = {"output": {"format": "g711_alaw"}}  # the beta's
    assert applied(audio_delta(bytes(800)), g711)[0].output_s == pytest.approx(0.1)
    g711["response"]["audio"] = {"output": {"format": {"type": "audio/opus"}}}  # seconds not counted
    record, _ = applied(audio_delta(bytes(800)), g711)
    assert record.ok and record.output_s == 0.0 and record.output_bytes == 800
    record, ends = applied({"type": "response.output_audio.delta", "delta": 3})
    assert ends == [True] and record.error_kind is ErrorKind.BAD_STREAM
