"""vLLM's realtime transcription over WebSocket: the simulator's session over a real loopback socket (vLLM's events,
the utterance's timing and trace, usage, refusals; the OpenAI Realtime API still served at the same path), and the
client's reading of an utterance's events (pure, hostile and fuzzed)."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from harness.sim_socket import SimSocket
from wsproto.events import AcceptConnection

from llm_locust.apis import vllm_realtime
from llm_locust.metrics.protocol import finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.sim import SimProcess, run_sim

KEY = "sk-vllm-realtime-test"
MODEL = "llm-locust-sim"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with run_sim("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "6", "--api-key", KEY) as s:
        yield s


class Client(SimSocket):
    """The simulator's WebSocket, its handshake accepted; `send` a message (a dict as JSON, a str as it is)."""

    def __init__(self, port: int, target: str = "/v1/realtime") -> None:
        super().__init__(port, target, KEY)
        assert isinstance(self.handshake, AcceptConnection)

    send = SimSocket.send_text


def trace(sim: SimProcess) -> list[dict[str, Any]]:
    return [record for record in sim.trace() if record["endpoint"] == "vllm_realtime"]


def test_a_session_of_utterances(sim):
    """vLLM's protocol: `session.update` (the model), then per utterance a commit, the audio, the final commit; one
    `transcription.delta` per word at the timing model's times, `transcription.done` with the text and usage."""
    client = Client(sim.port)
    created = client.event()
    assert created["type"] == "session.created" and created["id"].startswith("sess-") and created["created"] > 0
    pcm = bytes(32_000)  # one second of 16 kHz 16-bit audio
    ids = []
    for number, events in enumerate([vllm_realtime.turn({"audio": pcm, "model": MODEL}),
                                     vllm_realtime.turn({"audio": pcm[:16_000]})]):  # fmt: skip
        for event in events:
            client.send(event)
        answer = client.until("transcription.done")
        deltas, done = answer[:-1], answer[-1]
        assert [event["type"] for event in deltas] == ["transcription.delta"] * 6
        assert done["text"] == "".join(delta["delta"] for delta in deltas) and len(done["text"].split()) == 6
        prompt = 12 if number == 0 else 6  # one token per 80 ms of audio
        assert done["usage"] == {"prompt_tokens": prompt, "completion_tokens": 6, "total_tokens": prompt + 6}
        ids.append(done["id"])
    client.close()
    records = trace(sim)[-2:]
    assert [record["id"] for record in records] == ids
    assert {record["session"] for record in records} == {created["id"]}
    assert [record["answer"] for record in records] == [
        {"kind": "transcript", "audio_s": 1.0, "audio_bytes": 32_000},
        {"kind": "transcript", "audio_s": 0.5, "audio_bytes": 16_000},
    ]
    for record in records:  # token k due 20 + 5k ms after the final commit's arrival (at most 0.25 s late: loaded)
        late_s = [t - record["t_recv"] - (0.020 + 0.005 * k) for k, t in enumerate(record["token_times"])]
        assert len(late_s) == 6 and all(-0.0005 < late < 0.25 for late in late_s), late_s
        assert record["finish_reason"] == "stop" and not record["cancelled"]


def test_refusals_are_error_events_and_the_session_goes_on(sim):
    client = Client(sim.port)
    client.event()
    audio = base64.b64encode(bytes(3200)).decode()
    refused = [
        ({"type": "input_audio_buffer.commit"}, "model_not_validated"),  # vLLM: a commit before session.update
        ({"type": "session.update", "model": "no-such-model"}, "model_not_found"),
        ("{not json", "invalid_json"),
        ({"type": "nope"}, "unknown_event"),
        ({"type": "input_audio_buffer.append", "audio": "@@@"}, "invalid_audio"),
        ({"type": "input_audio_buffer.append", "audio": ""}, "invalid_audio"),
    ]
    for event, code in refused:
        client.send(event)
        error = client.event()
        assert error["type"] == "error" and error["code"] == code and isinstance(error["error"], str), error
    client.send({"type": "session.update", "model": MODEL})
    client.send({"type": "input_audio_buffer.commit", "final": True})  # no utterance under way
    assert client.event()["type"] == "error"
    client.send({"type": "input_audio_buffer.commit"})
    client.send({"type": "input_audio_buffer.append", "audio": audio})
    client.send({"type": "input_audio_buffer.commit", "final": True})
    client.send({"type": "input_audio_buffer.commit"})  # one transcription at a time
    events = client.until("transcription.done")
    assert [event["code"] for event in events if event["type"] == "error"] == ["generation_in_progress"]
    assert events[-1]["usage"]["prompt_tokens"] == 1  # 0.1 s of audio: at least one token
    client.close()


def test_the_openai_realtime_api_is_still_served_at_the_path(sim):
    """A session whose first event is the OpenAI Realtime API's is that API's (`wire.Api.serves_too`)."""
    from llm_locust.sim import apis

    assert apis.route("/v1/realtime", "")[0] is apis.BY_NAME["vllm_realtime"]
    client = Client(sim.port, "/v1/realtime?model=llm-locust-sim")
    created = client.event()
    assert created["session"]["model"] == MODEL  # the OpenAI session object too
    client.send({"type": "session.update", "session": {"type": "realtime", "max_output_tokens": 2}})
    assert client.event()["type"] == "session.updated"
    client.send({"type": "response.create"})
    done = client.until("response.done")[-1]
    assert done["response"]["usage"]["output_tokens"] == 2
    client.close()
    assert sim.trace()[-1]["endpoint"] == "realtime"


def applied(*events: Any, t_send: float = 0.0) -> tuple[RequestRecord, list[bool]]:
    """A record sent at `t_send` with `events` (objects, or raw bytes) applied at t = 1, 2, ...; whether each ended
    the turn."""
    record = RequestRecord("vllm_realtime", 0.0)
    record.t_send = t_send
    ends = [
        vllm_realtime.apply_event(record, event if isinstance(event, bytes) else json.dumps(event).encode(), float(t))
        for t, event in enumerate(events, 1)
    ]
    return record, ends


def delta(text: Any) -> dict[str, Any]:
    return {"type": "transcription.delta", "delta": text}


def done(usage: Any = None) -> dict[str, Any]:
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15} if usage is None else usage
    return {"type": "transcription.done", "text": "a b c", "usage": usage}


def test_deltas_are_the_turns_tokens_and_done_its_end():
    record, ends = applied({"type": "session.created", "id": "sess-1", "created": 1}, delta("a"), delta(""),
                           delta(" b"), delta(" c"), done())  # fmt: skip
    assert ends == [False] * 5 + [True]
    assert record.t_first == 2.0 and record.t_last == 5.0 and record.events == 3 and list(record.itl_us) == [2e6, 1e6]
    assert record.usage_completion_tokens == 3 and record.prompt_tokens == 12
    assert record.saw_done and record.finish_reason == "stop" and record.ok
    assert vllm_realtime.event_text(delta("x")) == "x" and vllm_realtime.event_text(done()) is None
    assert vllm_realtime.answer_parts(delta("x")) == ("x", None)
    traced = done()
    traced["id"] = "rt-7"  # the simulator's trace id (vLLM's event has none)
    assert applied(delta("a"), traced)[0].server_request_id == "rt-7"


def test_a_delta_heard_before_the_end_of_the_audio_counts_at_its_end():
    """A transcriber keeping up with the speaker: its deltas read after the final commit arrived before it; they count
    as arriving at the end of the audio (TTFT 0, never negative)."""
    record, _ = applied(delta("a"), delta(" b"), delta(" c"), done(), t_send=2.5)
    assert record.t_first == 2.5 and list(record.itl_us) == [0, 0.5e6] and record.ttft_s == 0.0 and record.ok


def test_failures_are_failures():
    record, ends = applied(
        delta("a"), {"type": "error", "error": "Model not validated.", "code": "model_not_validated"}
    )
    assert ends == [False, True] and record.error_kind is ErrorKind.STREAM_ERROR
    assert record.error_message == "error event: model_not_validated: Model not validated."
    record, _ = applied(done())  # done without any delta: no tokens
    assert finish(record, 2.0).error_kind is ErrorKind.NO_TOKENS


@pytest.mark.parametrize(
    "event",
    [
        b"{not json",
        b"[1, 2]",
        b"null",
        delta(5),
        delta(None),
        delta(["a"]),
        {"type": "transcription.delta"},
        done("x"),
        done([1]),
    ],
)
def test_a_hostile_event_fails_the_turn_and_ends_it(event):
    record, ends = applied(event)
    assert ends == [True] and record.error_kind is ErrorKind.BAD_STREAM, record.error_message


def test_implausible_usage_is_dropped_and_named():
    record, _ = applied(delta("a"), done({"completion_tokens": -1, "prompt_tokens": "12"}))
    assert record.usage_completion_tokens is None and record.prompt_tokens is None and finish(record, 3.0).ok
    record, _ = applied(delta("a"), done({"completion_tokens": 2**40}))  # not plausible for one request
    assert finish(record, 3.0).error_kind is ErrorKind.BAD_STREAM and record.usage_completion_tokens is None
    record, _ = applied(delta("a"), done({"completion_tokens": 10**30}))  # (orjson reads it as a float: not a count)
    assert record.usage_completion_tokens is None and finish(record, 3.0).ok


def test_fuzzed_events_never_raise():
    """Random JSON values of the right and wrong shapes, and random bytes: applied without raising; a turn that ends
    either failed or saw its done."""
    rng = random.Random(44)
    values = [None, True, 0, -1, 2**70, 1.5, "", "x", [], [1], {}, {"a": 1}]
    kinds = ["transcription.delta", "transcription.done", "error", "session.created", "x", None, 3]
    for _ in range(2000):
        record = RequestRecord("vllm_realtime", 0.0)
        if rng.random() < 0.2:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
        else:
            event = {"type": rng.choice(kinds)}
            for field in rng.sample(["delta", "usage", "error", "code", "text", "id"], rng.randrange(4)):
                event[field] = rng.choice(values)
            data = json.dumps(event).encode()
        if vllm_realtime.apply_event(record, data, 1.0):
            assert not record.ok or record.saw_done, data


def test_an_utterances_events_and_their_pace():
    pcm = bytes(range(256)) * 30  # 7680 bytes: 0.24 s of 16 kHz 16-bit audio
    events = vllm_realtime.turn({"audio": pcm, "model": "m"})
    kinds = [event["type"] for event in events]
    assert kinds == ["session.update", "input_audio_buffer.commit"] + ["input_audio_buffer.append"] * 3 + [
        "input_audio_buffer.commit"]  # fmt: skip
    assert events[0] == {"type": "session.update", "model": "m"} and events[-1]["final"] is True
    assert "final" not in events[1]
    assert b"".join(base64.b64decode(event["audio"]) for event in events[2:5]) == pcm
    seconds = [vllm_realtime.audio_seconds(event) for event in events]
    assert seconds[2:4] == [0.1, 0.1] and seconds[:2] == [0.0, 0.0] and seconds[5] == 0.0
    assert sum(seconds) == pytest.approx(0.24) and vllm_realtime.API.pace is vllm_realtime.audio_seconds
    assert vllm_realtime.turn({"audio": pcm})[0] == {"type": "input_audio_buffer.commit"}
    for size in (1, 2, 3, 3200, 3201):  # base64's padding
        assert sum(map(vllm_realtime.audio_seconds, vllm_realtime.audio_events(bytes(size)))) * 32_000 == (
            pytest.approx(size))  # fmt: skip
    with pytest.raises(TypeError, match="text"):
        vllm_realtime.turn({"audio": pcm, "text": "hi"})
    with pytest.raises(ValueError, match="audio= is required"):
        vllm_realtime.turn({})
    assert vllm_realtime.API.mount == "vllm_realtime.connect" and vllm_realtime.API.user == ""
    assert dict(vllm_realtime.API.paths) == {"openai-compatible": "/v1/realtime"}
