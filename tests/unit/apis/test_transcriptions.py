"""Speech to text's pure parts: the synthetic speech (a WAV of a set duration carrying its text), the body reader on
good, hostile and empty bodies, the shape and the multipart body, and the simulator's request parsing and refusals."""

from __future__ import annotations

import io
import wave

import pytest

from llm_locust.apis import APIS
from llm_locust.apis.transcriptions import WORDS_PER_S, read_transcription, shape, speech_wav, wav_duration_s
from llm_locust.metrics.record import ErrorKind, RequestRecord
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
    fields = {"prompt": "say these five words please"}
    shape(fields)
    spec, data = _parsed(fields)
    assert data["response_format"] == "json" and data["model"] == "m" and data["file"].filename == "speech.wav"
    assert spec.output_tokens == 5 and not spec.stream
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
