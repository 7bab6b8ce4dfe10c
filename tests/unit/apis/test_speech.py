"""Text to speech (`apis.speech`, `sim.apis.speech`): the audio's own bytes and the SSE events, split anywhere, read
into the first audio byte, the gaps and the audio's seconds (pcm, a WAV's header, formats not counted); hostile and
fuzzed streams that never raise; the built-in request; the simulator's request checks and its streams read back by
the client (pure: no runner, no server)."""

from __future__ import annotations

import base64
import json
import struct

import orjson
import pytest
from conftest import options
from hypothesis import given
from hypothesis import strategies as st

from llm_locust.apis import APIS, COUNTINGS
from llm_locust.apis import speech as speech_api
from llm_locust.config.settings import Settings
from llm_locust.metrics.protocol import finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.request import RequestSpec
from llm_locust.sim.apis import parse_request
from llm_locust.sim.apis import speech as sim_speech
from llm_locust.sim.apis.wire import ApiError
from llm_locust.workload.builder import Workload

USAGE = {"input_tokens": 4, "output_tokens": 3, "total_tokens": 7}


def read(pieces: list[tuple[bytes, float]], split: int | None = None, **request: object) -> RequestRecord:
    """A record of a speech request of `request`'s fields fed `pieces` (bytes, arrival s) through the API's framing
    reader, each split at byte `split` (None: whole), then the body's end at 9 s."""
    record = RequestRecord("speech", t_send=0.0, spec=RequestSpec(orjson.dumps(request), None))
    stream = APIS["speech"].framing.reader(record, APIS["speech"].parser, None, 1 << 20)
    for data, t in pieces:
        parts = [data] if split is None else [data[:split], data[split:]]
        if any([stream.feed(part, t) for part in parts if part]):
            break
    else:
        stream.flush(9.0)
    return finish(record, 9.0)


def delta(audio: bytes) -> bytes:
    return b'data: {"type":"speech.audio.delta","audio":"%b"}\n\n' % base64.b64encode(audio)


DONE = b"data: " + orjson.dumps({"type": "speech.audio.done", "usage": USAGE}) + b"\n\n"


@pytest.mark.parametrize("split", [None, 1, 7, -3, -1])
def test_pcm_bytes_each_piece_an_output_and_its_seconds_at_24_khz(split):
    record = read([(bytes(4800), 0.1), (bytes(4800), 0.15), (bytes(2400), 0.3)], split, response_format="pcm")
    assert record.ok and record.ttft_s == pytest.approx(0.1) and record.finish_reason == "stop"
    assert record.events == (3 if split is None else 6) and record.output_bytes == 12_000
    assert record.output_s == pytest.approx(0.25) and record.real_time_factor == pytest.approx(0.3 / 0.25)


@pytest.mark.parametrize("split", [None, 1, 20, 45, -1])
def test_sse_deltas_then_done_with_usage(split):
    pieces = [(delta(bytes(4800)), 0.1), (delta(bytes(4800)), 0.12), (delta(b""), 0.13), (DONE, 0.2)]
    record = read(pieces, split, response_format="pcm", stream_format="sse")
    assert record.ok and record.events == 2 and record.itl_us.tolist() == [20_000] and record.saw_done
    assert (record.usage_completion_tokens, record.prompt_tokens, record.output_s) == (3, 4, pytest.approx(0.2))


def wav(samples: int, rate: int = 16_000, channels: int = 2, declared: int | None = None, extra: bytes = b"") -> bytes:
    """A WAV stream's bytes: 16-bit `channels` at `rate`, `extra` chunks before its data (`declared`: its data size
    in the header; None: the true one)."""
    data = bytes(samples * channels * 2)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * 2, channels * 2, 16)
    size = len(data) if declared is None else declared
    head = b"RIFF\xff\xff\xff\xffWAVEfmt " + struct.pack("<I", 16) + fmt + extra
    return head + b"data" + struct.pack("<I", size) + data


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
@pytest.mark.parametrize("declared", [None, 0xFFFFFFFF, 0])
def test_a_wav_s_seconds_from_its_header_split_anywhere(stream_format, declared):
    """The header's rate, channels and width (after a LIST chunk), its data in pieces that split the header."""
    audio = wav(8000, declared=declared, extra=b"LIST" + struct.pack("<I", 5) + b"INFOx\x00")
    pieces = [audio[:10], audio[10:50], audio[50:60], audio[60:]]
    sse = stream_format == "sse"
    stream = [(delta(p) if sse else p, 0.1 * (i + 1)) for i, p in enumerate(pieces)] + ([(DONE, 0.5)] if sse else [])
    record = read(stream, None, response_format="wav", stream_format=stream_format)
    assert record.ok and record.output_s == pytest.approx(0.5) and record.output_bytes == len(audio)
    assert record.events == 4


def test_a_wav_cut_before_its_declared_end_or_not_a_wav_fails():
    cut = read([(wav(8000)[:-100], 0.1)], response_format="wav")
    assert cut.error_kind is ErrorKind.INCOMPLETE and cut.output_s == 0.0
    assert read([(b"ID3" + bytes(100), 0.1)], response_format="wav").error_kind is ErrorKind.BAD_STREAM
    assert read([(b"RIFF", 0.1)], response_format="wav").error_kind is ErrorKind.BAD_STREAM  # ended in its header
    no_data = wav(10)[:36] + b"junk" + struct.pack("<I", 8192) + bytes(8192)
    assert read([(no_data, 0.1)], response_format="wav").error_kind is ErrorKind.BAD_STREAM


def test_formats_whose_seconds_need_a_decoder_are_timed_not_counted():
    """mp3 (OpenAI's default, a request naming no format) and the others: first byte, gaps, bytes; no seconds."""
    for fields in ({"response_format": "mp3"}, {}, {"response_format": "opus", "stream_format": "sse"}):
        sse = fields.get("stream_format") == "sse"
        pieces = [(delta(b"\xff\xfb" * 50) if sse else b"\xff\xfb" * 50, 0.1), *([(DONE, 0.2)] if sse else [])]
        record = read(pieces, **fields)
        assert record.ok and record.ttft_s == pytest.approx(0.1) and record.output_bytes == 100
        assert record.output_s == 0.0 and record.real_time_factor is None


@pytest.mark.parametrize(
    ("pieces", "kind"),
    [
        ([(delta(bytes(10)), 0.1)], ErrorKind.INCOMPLETE),  # no done event
        ([(b'data: {"type":"error","error":{"message":"boom"}}\n\n', 0.1)], ErrorKind.STREAM_ERROR),
        ([(b'data: {"type":"speech.audio.delta","audio":3}\n\n', 0.1)], ErrorKind.BAD_STREAM),
        ([(b'data: {"type":"speech.audio.delta","audio":"@@"}\n\n', 0.1)], None),  # pcm: counted by its length
        ([(b"data: [1, 2]\n\n", 0.1)], ErrorKind.BAD_STREAM),
        ([(b"data: {not json\n\n", 0.1)], ErrorKind.BAD_STREAM),
        ([(DONE, 0.1)], ErrorKind.NO_TOKENS),
    ],
)
def test_hostile_sse_streams_fail_by_kind(pieces, kind):
    record = read(pieces + ([(DONE, 0.3)] if kind is None else []), response_format="pcm", stream_format="sse")
    assert record.error_kind is kind, record.error_message


def test_a_wav_s_base64_that_is_not_base64_fails():
    record = read([(b'data: {"type":"speech.audio.delta","audio":"@@"}\n\n', 0.1), (DONE, 0.2)],
                  response_format="wav", stream_format="sse")  # fmt: skip
    assert record.error_kind is ErrorKind.BAD_STREAM


@given(
    st.lists(st.binary(max_size=80), max_size=6),
    st.sampled_from(["pcm", "wav", "mp3"]),
    st.sampled_from(["audio", "sse"]),
)
def test_any_bytes_never_raise(pieces, response_format, stream_format):
    read([(p, 0.1 * i) for i, p in enumerate(pieces)], response_format=response_format, stream_format=stream_format)


def test_the_api_s_entry_its_counting_and_the_built_in_request():
    entry = APIS["speech"]
    assert entry.mount == "audio.speech.create" and entry.user == "SpeechUser" and not entry.counts_outputs
    assert COUNTINGS["audio_seconds"] is speech_api.AUDIO and entry.streams_body({})
    s = Settings.from_options(options("--host", "http://127.0.0.1:1", "--prompt-tokens", "16", "--seed", "1"))
    spec = Workload(s.workload, "speech", server_family=s.endpoint.server_family).next_request("m")
    sent = json.loads(spec.body)
    assert len(sent["input"].split()) == 16 and sent["voice"] == speech_api.VOICE and sent["model"] == "m"
    assert sent["response_format"] == "pcm" and "stream_format" not in sent and "max_tokens" not in sent
    sse = Settings.from_options(options("--host", "http://127.0.0.1:1", "--extra-body", '{"stream_format": "sse"}'))
    spec = Workload(sse.workload, "speech", server_family=sse.endpoint.server_family).next_request("m")
    assert json.loads(spec.body)["stream_format"] == "sse"


def sim_spec(**data: object):
    return parse_request(orjson.dumps({"model": "sim", "voice": "alloy", **data}), "speech", ("sim",), 16)[0]


def test_the_simulator_s_request_checks():
    spec = sim_spec(input="one two three four five", response_format="pcm", speed=2.0)
    assert (spec.prompt_tokens, spec.samples, spec.output_tokens, spec.stream) == (5, 24_000, 10, True)
    assert sim_spec(input="x", response_format="wav", voice={"id": "v1"}).samples == 0.4 * 24_000
    for bad in ({"input": ""}, {"input": 3}, {"input": "x" * 4097}, {"input": "x"},  # mp3, OpenAI's default
                {"input": "x", "response_format": "opus"}, {"input": "x", "response_format": "pcm", "speed": 5},
                {"input": "x", "response_format": "pcm", "speed": True}, {"input": "x", "response_format": "pcm",
                "stream_format": "ws"}, {"input": "x", "response_format": "pcm", "voice": ""}):  # fmt: skip
        with pytest.raises(ApiError) as refused:
            sim_spec(**bad)
        assert refused.value.status == 400, bad


@pytest.mark.parametrize("response_format", ["pcm", "wav"])
@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_the_simulator_s_streams_read_back_by_the_client(response_format, stream_format):
    """Every chunk the simulator writes (one ITL apart), read by the client's reader: one output per chunk, the
    audio's seconds as the trace's, its bytes, its content type."""
    spec = sim_spec(input="the quick brown fox jumps", response_format=response_format, stream_format=stream_format)
    encoder = sim_speech.SpeechEncoder(spec, "speech-1", 1, "sim", 0)
    pieces = [(b"".join(encoder.token_event(i)), 0.1 + 0.01 * i) for i in range(spec.output_tokens)]
    pieces += [(event, 0.5) for event in encoder.end_events()]
    record = read(pieces, None, response_format=response_format, stream_format=stream_format)
    truth = spec.answer.to_dict()
    assert record.ok and record.events == spec.output_tokens == 20 and len(record.itl_us) == 19
    assert record.output_s == truth["audio_s"] == 2.0 and record.output_bytes == truth["audio_bytes"]
    expected = "text/event-stream" if stream_format == "sse" else f"audio/{response_format}"
    assert sim_speech.content_type(spec) == expected
    if stream_format == "sse":
        assert record.usage_completion_tokens == 20 and record.prompt_tokens == 5
