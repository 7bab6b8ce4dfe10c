"""Speech to text's pure parts: the synthetic speech (a WAV of a set duration carrying its text), the body reader on
good, hostile and empty bodies, the shape and the multipart body, and the simulator's request parsing and refusals."""

from __future__ import annotations

import io
import wave

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_locust.apis import APIS
from llm_locust.apis.transcriptions import (
    WORDS_PER_S,
    apply_event,
    audio_seconds,
    event_parts,
    event_text,
    heard_right,
    normalized_words,
    read_transcription,
    shape,
    speech_wav,
    wav_duration_s,
    word_error_rate,
)
from llm_locust.metrics.protocol import finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.sim.answers import Answerer
from llm_locust.sim.apis import BY_NAME, parse_request
from llm_locust.sim.apis.transcriptions import AUDIO_TOKENS_PER_S, spoken_text
from llm_locust.sim.apis.transcriptions import WORDS_PER_S as SIM_WORDS_PER_S
from llm_locust.sim.apis.wire import ApiError, CompletionSpec
from llm_locust.workload.body import request_body


@pytest.mark.parametrize("text", ["one", "hello there my friend", "ünïcode wörds, and an odd length"])
def test_speech_lasts_as_long_as_its_words_and_carries_them(text: str) -> None:
    audio = speech_wav(text)
    assert wav_duration_s(audio) == pytest.approx(len(text.split()) / WORDS_PER_S)
    assert spoken_text(audio) == (pytest.approx(len(text.split()) / WORDS_PER_S), text)
    assert spoken_text(speech_wav(text, duration_s=3.25)) == (3.25, text)


def _record() -> RequestRecord:
    return RequestRecord(endpoint="transcriptions", t_send=0.0)


def test_body_reader_takes_the_text_and_the_token_usage() -> None:
    record = _record()
    usage = b'"usage": {"type": "tokens", "input_tokens": 500, "output_tokens": 9, "total_tokens": 509}'
    read_transcription(b'{"text": "a b c", ' + usage + b"}", record, 1)
    assert record.ok and record.content_text == "a b c" and record.output_tokens == 9 and record.prompt_tokens == 500
    duration = _record()
    read_transcription(b'{"text": " a b c", "usage": {"type": "duration", "seconds": 4}}', duration, 1)
    assert duration.ok and duration.output_tokens == 3 and duration.prompt_tokens is None  # the words


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"not json", ErrorKind.BAD_STREAM),
        (b'{"txt": "a"}', ErrorKind.BAD_STREAM),
        (b'{"text": 5}', ErrorKind.BAD_STREAM),
        (b"[1]", ErrorKind.BAD_STREAM),
        (b'{"text": "a", "usage": 3}', ErrorKind.BAD_STREAM),
        (b'{"text": "a", "usage": {"type": "tokens", "output_tokens": -1}}', ErrorKind.BAD_STREAM),
        (b'{"text": "  "}', ErrorKind.NO_TOKENS),
    ],
)
def test_body_reader_fails_what_is_not_a_transcription(body: bytes, kind: ErrorKind) -> None:
    record = _record()
    read_transcription(body, record, 1)
    assert record.error_kind is kind


def _parsed(fields: dict) -> tuple[CompletionSpec, dict]:
    """The simulator's reading of a transcription request of `fields` as the client sends it."""
    api = APIS["transcriptions"]
    body, content_type = api.encode_body(request_body(api, fields, "m", {}))
    return parse_request(body, "transcriptions", ("m",), 64, None, content_type)


def test_a_prompt_is_spoken_and_sent_as_a_multipart_form_the_simulator_reads() -> None:
    fields = {"prompt": "say these five words please", "stream": False}
    shape(fields)
    spec, data = _parsed(fields)
    assert data["response_format"] == "json" and data["model"] == "m" and data["file"].filename == "speech.wav"
    assert spec.output_tokens == 5 and not spec.stream and data["stream"] == "false"
    assert spec.prompt_tokens == 5 / WORDS_PER_S * AUDIO_TOKENS_PER_S
    body = BY_NAME["transcriptions"].encoder(spec, "trsc-1", 0, "m", 0).body()
    record = _record()
    read_transcription(body, record, 1)
    assert record.content_text == "say these five words please" and record.output_tokens == 5


def test_audio_without_words_of_its_own_is_heard_at_the_simulators_rate() -> None:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:  # 4 s of 8 kHz audio, no comment
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(bytes(2 * 8000 * 4))
    spec, _ = _parsed({"file": out.getvalue()})
    assert spec.output_tokens == 4 * SIM_WORDS_PER_S and spec.prompt_tokens == 4 * AUDIO_TOKENS_PER_S


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"language": "en"}, "'file' is required"),
        ({"file": b"not a wav"}, "not a WAV file"),
        ({"file": speech_wav("a b"), "response_format": "srt"}, "response_format"),
        ({"file": speech_wav("a b"), "stream": "yes"}, "'stream'"),
        ({"file": speech_wav("   ")}, "says nothing"),
    ],
)
def test_the_simulator_refuses_what_it_cannot_transcribe(fields: dict, needle: str) -> None:
    with pytest.raises(ApiError, match=needle) as refused:
        _parsed(fields)
    assert refused.value.status == 400


def _stream(events: list[bytes]) -> RequestRecord:
    """A record after the SSE data payloads `events`, one a millisecond, and the stream's end."""
    record = _record()
    for i, data in enumerate(events):
        if apply_event(record, data, 1.0 + i / 1e3):
            break
    return finish(record, 2.0)


DELTA = b'{"type": "transcript.text.delta", "delta": "%s"}'
DONE = b'{"type": "transcript.text.done", "text": "a b", "usage": {"type": "tokens", "input_tokens": 50, "output_tokens": 2, "total_tokens": 52}}'  # noqa: E501


def test_stream_of_deltas_and_done_with_usage() -> None:
    record = _stream([DELTA % b"a", DELTA % b"", DELTA % b" b", DONE])
    assert record.ok and record.events == 2 and list(record.itl_us) == [2000]  # the empty delta is no token
    assert (record.output_tokens, record.prompt_tokens, record.finish_reason) == (2, 50, "stop")
    assert record.t_first == record.t_first_content == 1.0


def test_vllm_transcription_chunks_and_done() -> None:
    chunk = b'{"id": "trsc-1", "object": "transcription.chunk", "choices": [{"delta": {"content": "%s"}}]}'
    usage = b'{"object": "transcription.chunk", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}'
    record = _stream([chunk % b"a", chunk % b" b", usage, b"[DONE]"])
    assert record.ok and record.events == 2 and record.output_tokens == 2 and record.prompt_tokens == 9
    assert record.server_request_id == "trsc-1"
    assert event_text(orjson.loads(chunk % b" b")) == " b" and event_parts(orjson.loads(DELTA % b"x")) == ("x", None)


@pytest.mark.parametrize(
    ("events", "kind"),
    [
        ([DELTA % b"a"], ErrorKind.INCOMPLETE),
        ([DELTA % b"a", b'{"type": "error", "error": {"message": "engine died"}}'], ErrorKind.STREAM_ERROR),
        ([DELTA % b"a", b"not json"], ErrorKind.BAD_STREAM),
        ([b'{"type": "transcript.text.delta", "delta": 5}', DONE], None),  # a number is a non-empty delta
        ([b'{"type": "transcript.text.delta"}'], ErrorKind.BAD_STREAM),
        ([DONE], ErrorKind.NO_TOKENS),
        ([b"[1, 2]"], ErrorKind.BAD_STREAM),
    ],
)
def test_hostile_streams_fail_by_kind(events: list[bytes], kind: ErrorKind | None) -> None:
    assert _stream(events).error_kind is kind


@given(st.lists(st.binary(max_size=40), max_size=6))
def test_any_payloads_never_raise(payloads: list[bytes]) -> None:
    _stream(payloads)


def test_the_simulators_stream_reads_back_word_for_word() -> None:
    fields = {"prompt": "one two three four five six"}
    shape(fields)
    spec, data = _parsed(fields)
    assert spec.stream and data["stream"] == "true"
    encoder = BY_NAME["transcriptions"].encoder(spec, "trsc-1", 0, "m", 0)
    events = [encoder.token_event(i)[1] for i in range(spec.output_tokens)] + encoder.end_events()
    texts = [event_text(orjson.loads(event[6:])) for event in events]
    assert "".join(text or "" for text in texts) == "one two three four five six"
    record = _stream([event[6:-2] for event in events])
    assert record.ok and record.events == record.output_tokens == 6 and record.prompt_tokens == spec.prompt_tokens
    assert encoder.tokens_event(0, 2) == b'data: {"type":"transcript.text.delta","delta":"one two"}\n\n'
    assert _stream([encoder.error_event("boom")[6:-2]]).error_kind is ErrorKind.STREAM_ERROR


def test_word_error_rate_is_jiwers_and_a_score_is_one_minus_it() -> None:
    assert word_error_rate("the cat sat on the mat", "the cat sat on the mat") == 0.0
    assert word_error_rate("the cat sat on the mat", "the dog sat on mat") == pytest.approx(2 / 6)  # 1 sub, 1 del
    assert (word_error_rate("", ""), word_error_rate("", "noise")) == (0.0, 1.0)
    # a real server's casing and punctuation are not errors (faster-whisper: " The quick brown fox ... dog.")
    assert word_error_rate("the dog's bed is here", " The dog\u2019s bed, is... here!") == 0.0
    assert normalized_words(" 'Tis the Dog's BED-time.  ") == "tis the dog's bed time"
    assert word_error_rate("the cat sat", "The cat's at.") == pytest.approx(2 / 3)
    answer = type("A", (), {"text": "a x c d"})()
    assert heard_right("a b c d")(answer) == 0.75
    assert heard_right("a")(type("A", (), {"text": "x y z"})()) == 0.0  # WER 3: no score below 0


def test_the_simulator_hears_each_word_right_with_its_accuracy() -> None:
    fields = {"prompt": " ".join(f"w{i}" for i in range(2000))}
    shape(fields)
    spec, data = _parsed(fields)
    spec = Answerer(0.8, 0, 1.0, 0.0, seed=7).plan(spec, data, None)
    transcript = spec.answer
    transcript.settle(3)
    transcript.settle(3)  # once
    heard = "".join(transcript.pieces)
    assert len(transcript.pieces) == 2000 and transcript.to_dict()["wrong_words"] == transcript.wrong
    said = " ".join(f"w{i}" for i in range(2000))
    assert word_error_rate(said, heard) == transcript.wrong / 2000  # every error a substitution
    assert abs(transcript.wrong / 2000 - 0.2) < 3 * (0.2 * 0.8 / 2000) ** 0.5


def test_audio_seconds_of_each_file_form(tmp_path) -> None:
    audio = speech_wav("a b c d e")  # 2 s
    path = tmp_path / "a.wav"
    path.write_bytes(audio)
    seconds = [audio_seconds({"file": form}) for form in (audio, ("a.wav", audio), ("a.wav", audio, "audio/wav"), path)]
    assert seconds == [2.0] * 4
    assert audio_seconds({"file": b"not a wav"}) == audio_seconds({}) == audio_seconds({"file": io.BytesIO(audio)}) == 0
    assert APIS["transcriptions"].input_s({"file": audio}) == 2.0
