"""Speech to text (`POST /v1/audio/transcriptions`, OpenAI's and vLLM's): the audio `file`, `model`, `language`,
`response_format`, `stream` as multipart/form-data (`bodies.multipart_body`). It answers each request as its body
asks (`Api.streams_body`): a built-in user's streams (`stream: true`), a scenario's call as it says.

- Streamed (SSE, the openai SDK's `TranscriptionStreamEvent`s): each `transcript.text.delta` with a non-empty `delta`
  is an output token event (TTFT, ITL); `transcript.text.done` ends the stream with its `usage` (`type: "tokens"`:
  `input_tokens` the audio's, `output_tokens` the text's). vLLM's form is read too: OpenAI-style
  `transcription.chunk`s (`choices[0].delta.content`, a `usage` of `prompt_tokens` / `completion_tokens`) ending in
  `data: [DONE]`. An `error` event (or an `error` object) is a `stream_error` failure.
- Not streamed: one JSON object, `{"text": ...}` (`response_format` "json", the default), with its usage when the
  server counts tokens (a `{"type": "duration"}` usage counts none); its output tokens are the usage's, else the
  transcript's words; its latency is E2E.

A built-in user speaks its prompt: `speech_wav` makes a WAV (16 kHz, 16-bit mono) as long as the prompt read at
`WORDS_PER_S` — a prompt of `--prompt-tokens 25` words is 10 s of audio — its samples silence and its text in the
file's INFO comment (`ICMT`): a real server transcribes the audio and ignores it, the simulator transcribes that text.
A scenario sends any file (`self.llm.audio.transcriptions.create(file=open("a.wav", "rb"), ...)`, every form
`bodies.multipart_body` takes); with its reference transcript, `score=heard_right(reference)` scores each answer by
its word error rate (jiwer's, on the words lower-cased without punctuation), the run's accuracy then 1 − the mean
word error rate under load. A request's audio seconds (`audio_seconds`, a WAV's header) give summary.json's
`input_s`, `input_s_per_s` (audio seconds transcribed per second) and `real_time_factor` (E2E over the audio's
duration).
"""

from __future__ import annotations

import io
import os
import re
import struct
import wave
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from llm_locust.apis.bodies import multipart_body
from llm_locust.apis.registry import Api, openai_paths
from llm_locust.apis.shapes import joined
from llm_locust.metrics.protocol import (
    TokenChunks,
    apply_chunk,
    apply_token,
    check_usage,
    decode_object,
    error_text,
    guarded,
)
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.stream_text import openai_parts, openai_text

WORDS_PER_S = 2.5
"""How fast a built-in user's prompt is spoken: 150 words a minute, a usual speaking rate."""
SAMPLE_RATE = 16_000
"""The synthetic audio's samples per second (16-bit, mono: Whisper's input rate)."""


def speech_wav(text: str, duration_s: float | None = None) -> bytes:
    """A WAV file of `duration_s` seconds of silence (None: `text` read at `WORDS_PER_S`, at least 1 word) saying
    `text`: its text in a `LIST`/`INFO` chunk's `ICMT` comment after the samples."""
    if duration_s is None:
        duration_s = max(len(text.split()), 1) / WORDS_PER_S
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(bytes(2 * round(duration_s * SAMPLE_RATE)))
    comment = text.encode() + b"\x00"
    comment += b"\x00" * (len(comment) % 2)  # a chunk's data is padded to an even length
    info = b"INFO" + b"ICMT" + struct.pack("<I", len(comment)) + comment
    data = out.getvalue() + b"LIST" + struct.pack("<I", len(info)) + info
    return data[:4] + struct.pack("<I", len(data) - 8) + data[8:]  # the RIFF size covers the new chunk


def wav_duration_s(content: bytes) -> float:
    """The duration of a WAV file's audio, seconds (its frames over its frame rate); wave.Error or EOFError when it is
    not a WAV file."""
    with wave.open(io.BytesIO(content), "rb") as wav:
        return wav.getnframes() / wav.getframerate()


_PUNCTUATION = re.compile(r"[^\w\s']|_")
_APOSTROPHE_APART = re.compile(r"(?<!\w)'|'(?!\w)")


def normalized_words(text: str) -> str:
    """`text`'s words as a word error rate compares them: lower case, punctuation dropped (an apostrophe within a word
    kept, a typographic one made straight), one space between words — a real server's "The dog’s bed." is the
    reference's "the dog's bed"."""
    text = _PUNCTUATION.sub(" ", text.lower().replace("\u2019", "'"))
    return " ".join(_APOSTROPHE_APART.sub(" ", text).split())


def word_error_rate(reference: str, heard: str) -> float:
    """The word error rate of the transcript `heard` against `reference`, both `normalized_words` (jiwer's:
    substitutions, deletions and insertions over the reference's words; 0 for two empty texts, 1 for a transcript of
    an empty reference). jiwer is imported here, by the scenarios that score: every process imports every API module
    (66 ms more each)."""
    import jiwer

    reference, heard = normalized_words(reference), normalized_words(heard)
    if not reference:
        return 0.0 if not heard else 1.0
    return float(jiwer.wer(reference, heard))


def heard_right(reference: str) -> Callable[[Any], float]:
    """A scenario's `score=` for a transcription of `reference`: 1 − its word error rate (at least 0), so the run's
    accuracy is 1 − the mean word error rate under load (summary.json `accuracy`, with its standard error)."""
    return lambda answer: max(0.0, 1.0 - word_error_rate(reference, answer.text))


def audio_seconds(body: Mapping[str, Any]) -> float:
    """The duration of the WAV audio a request's `file` carries (bytes, a (file name, bytes[, type]) tuple or a path),
    seconds; 0.0 for another form (an open file: read once, by the body's encoder) or audio that is not WAV."""
    audio = body.get("file")
    content = audio[1] if isinstance(audio, tuple) and len(audio) >= 2 else audio
    try:
        if isinstance(content, os.PathLike):
            with open(content, "rb") as file:
                content = file.read()
        return wav_duration_s(bytes(content)) if isinstance(content, bytes | bytearray) else 0.0
    except (OSError, wave.Error, EOFError, ZeroDivisionError):
        return 0.0


def read_transcription(content: bytes, record: RequestRecord, inputs: int) -> None:
    """Check a transcription body (`{"text": ...}`) and take its text and usage onto `record` (`inputs`: not read)."""
    try:
        data = orjson.loads(content)
        text, usage = data["text"], data.get("usage") or {}
        output_tokens = usage.get("output_tokens") if usage.get("type") == "tokens" else None
        input_tokens = usage.get("input_tokens") if usage.get("type") == "tokens" else None
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        record.fail(ErrorKind.BAD_STREAM, f"response is not an OpenAI transcription object: {error_text(content)}")
        return
    if type(text) is not str:
        record.fail(ErrorKind.BAD_STREAM, f"transcription's text is {type(text).__name__}, not a string")
        return
    record.content_text = record.answer_text = text
    record.reasoning_text = ""
    record.events = len(text.split())  # the words: its output tokens when the server counts none
    if type(output_tokens) is int:
        record.usage_completion_tokens = output_tokens
    if type(input_tokens) is int:
        record.prompt_tokens = input_tokens
    check_usage(record)
    if record.ok and record.output_tokens == 0:
        record.fail(ErrorKind.NO_TOKENS, "transcription is empty")


DELTA, DONE = "transcript.text.delta", "transcript.text.done"
VLLM_CHUNK = "transcription.chunk"
"""vLLM's streamed chunk object (OpenAI chunks: `choices[0].delta.content`)."""


def apply_event(record: RequestRecord, data: bytes, t: float, chunks: TokenChunks | None = None) -> bool:
    """Apply one transcription stream event's data that arrived at `t` (perf_counter s) to `record` (`chunks`
    unused); True when the stream is over for the client (its last event, `[DONE]`, a failure). Never raises."""
    if data == b"[DONE]":
        record.saw_done = True
        return True
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    """`apply_event` on the decoded event; raises on fields of unexpected types."""
    kind = event.get("type")
    if kind == DELTA:
        if event["delta"]:
            apply_token(record, t)
        return False
    if kind == DONE:
        usage = event.get("usage") or {}
        if usage.get("type") == "tokens":
            output_tokens, input_tokens = usage.get("output_tokens"), usage.get("input_tokens")
            if type(output_tokens) is int and output_tokens >= 0:
                record.usage_completion_tokens = output_tokens
            if type(input_tokens) is int and input_tokens >= 0:
                record.prompt_tokens = input_tokens
        record.finish_reason = "stop"
        record.saw_done = True
        return True
    if kind == "error" or event.get("error"):
        record.fail(ErrorKind.STREAM_ERROR, f"error in stream: {error_text(event.get('error') or event)}")
        return True
    if event.get("object") == VLLM_CHUNK:
        return apply_chunk(record, event, t)
    return False


def event_text(event: dict) -> str | None:
    """The text an event carries (a delta; vLLM's chunk's content), else None: what `--tokenizer` counts."""
    delta = event.get("delta")
    if event.get("type") == DELTA:
        return delta if type(delta) is str else None
    return openai_text(event) if event.get("object") == VLLM_CHUNK else None


def event_parts(event: dict) -> tuple[str | None, str | None]:
    """(answer text, reasoning text) of one event: a delta's text, no reasoning."""
    if event.get("object") == VLLM_CHUNK:
        return openai_parts(event)
    return event_text(event), None


def shape(body: dict[str, Any]) -> None:
    """The prompt (or the messages' texts) spoken (`speech_wav`) as the `file`, streamed (a built-in user's request:
    `--extra-body '{"stream": false}'` asks for one JSON body); `response_format` json."""
    if "prompt" in body or "messages" in body:
        text = body.pop("prompt") if "prompt" in body else joined(body.pop("messages"))
        body["file"] = ("speech.wav", speech_wav(text), "audio/wav")
        body.setdefault("stream", True)
    body.setdefault("response_format", "json")


API = Api(
    "transcriptions", "audio transcriptions",
    openai_paths("/v1/audio/transcriptions", azure="audio/transcriptions", databricks=False), shape,
    max_tokens_field="", forces_length=False, parser=apply_event, event_text=event_text, answer_parts=event_parts,
    read_body=read_transcription, encode_body=multipart_body,
    mount="audio.transcriptions.create", user="TranscriptionsUser", input_seconds=audio_seconds,
)  # fmt: skip
