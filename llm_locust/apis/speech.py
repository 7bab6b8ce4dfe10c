"""Text to speech (`POST /v1/audio/speech`, OpenAI's): `input`, `voice`, `model`, `response_format`, `speed`,
`stream_format`, `instructions` (JSON). Its answer is always streamed, as the body's `stream_format` asks:

- `audio` (OpenAI's default): the body is the audio's own bytes. Each piece of body that arrives is an output event:
  the first is the time to the first audio byte (TTFT, TTFO), the gaps between pieces the ITL samples; the body's
  end ends the request.
- `sse`: the openai SDK's `SpeechAudioDeltaEvent`s — each `speech.audio.delta` with a non-empty `audio` (base64) is
  an output event — then `speech.audio.done` with `usage` (`input_tokens`, `output_tokens`), which ends it. An
  `error` event fails it (`stream_error`).

The audio's seconds (`RequestRecord.output_s`, and its bytes `output_bytes`) come from its format, as the request's
`response_format` names it: `pcm` is 24 kHz, 16-bit mono (OpenAI's); `wav` is read from its header (sample rate,
channels, sample width; a data size it declares and the body falls short of fails the request as incomplete — a
streamed WAV's unknown size, 0 or 0xFFFFFFFF, is the bytes that came). `mp3`, `opus`, `aac` and `flac` (OpenAI's
default is `mp3`) are measured — first byte, gaps, E2E, bytes — but their seconds are not counted: a frame's duration
needs a decoder's parse of the format (a variable bitrate's frames differ), which this client does not carry; their
`output_s` is 0. summary.json then has `output_s` (audio seconds produced), `output_s_per_s` and `real_time_factor`
(E2E over the audio's seconds, < 1: faster than real time). What a run of it counts is audio seconds (`AUDIO`).

A built-in user speaks its prompt: the `--embedding-batch` prompt texts joined into `input`, voice `VOICE`, `pcm`,
streamed as the audio's bytes (`--extra-body '{"stream_format": "sse"}'` asks for events, `{"response_format":
"wav"}` for a WAV). A scenario calls `self.llm.audio.speech.create(input=..., voice=..., response_format=...)`, as the
openai SDK's `client.audio.speech.create`. Pure, never raises.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

import orjson

from llm_locust.apis.images import decoded_bytes
from llm_locust.apis.registry import Api, Counting, Rate, openai_paths
from llm_locust.metrics.framing import Framing
from llm_locust.metrics.protocol import EventStream, apply_token, decode_object, error_text, guarded
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.metrics.sse import DEFAULT_MAX_EVENT_BYTES

PCM_BYTES_PER_S = 24_000 * 2
"""OpenAI's pcm: 24 kHz, 16-bit, mono."""
VOICE = "alloy"
"""A built-in user's voice (`--extra-body` changes it)."""
MAX_WAV_HEADER_BYTES = 4096
"""The most of a WAV stream read before its `data` chunk (its header: `fmt ` and any `LIST` chunk before the data)."""
UNKNOWN_SIZES = (0, 0xFFFFFFFF)
"""A streamed WAV's data size when the server did not know it as it wrote the header."""
DELTA, DONE = "speech.audio.delta", "speech.audio.done"

AUDIO = Counting(
    "audio_seconds",
    (Rate("output_s_per_s", "audio s/s", "Audio seconds/s"),),
    (("ttft", "time to first audio"), ("itl", "gap between audio chunks"), ("e2e", "Latency")),
)
"""A text-to-speech run: audio seconds produced per second (its requests' `RequestRecord.output_s`); the time to the
first audio byte, the gaps between audio chunks, E2E."""


class AudioCount:
    """The audio of one response as it arrives, in its `response_format`: its bytes and, for pcm and WAV, its
    seconds."""

    __slots__ = ("_bytes_per_s", "_declared", "_header", "bad", "data_bytes", "total_bytes")

    def __init__(self, response_format: Any) -> None:
        self._bytes_per_s = PCM_BYTES_PER_S if response_format == "pcm" else 0
        self._header: bytearray | None = bytearray() if response_format == "wav" else None  # until its data chunk
        self._declared = 0  # a WAV's declared data size (0: unknown)
        self.data_bytes = self.total_bytes = 0
        self.bad = ""  # why the audio is not the format it was asked in ("": it is)

    def add(self, audio: bytes | bytearray | memoryview) -> None:
        """Count a piece of the audio's bytes."""
        self.total_bytes += len(audio)
        if self._header is None:
            self.data_bytes += len(audio)
        else:
            self._header += audio
            self._read_header()

    def add_base64(self, text: str) -> None:
        """Count a piece of the audio given as base64 (decoded only while a WAV's header is being read)."""
        if self._header is None:
            n = decoded_bytes(text)
            self.total_bytes += n
            self.data_bytes += n
            return
        try:
            self.add(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError):
            self.bad = "audio is not base64"

    def _read_header(self) -> None:
        """Read a WAV's chunks up to its `data` chunk (what came after the header is data); `bad` if it is no WAV."""
        header = self._header
        if len(header) < 12:  # type: ignore[arg-type]
            return
        if header[:4] != b"RIFF" or header[8:12] != b"WAVE":  # type: ignore[index]
            self.bad = "audio is not a WAV stream (no RIFF/WAVE header)"
            self._header = None
            return
        at = 12
        while at + 8 <= len(header):  # type: ignore[arg-type]
            chunk, size = bytes(header[at : at + 4]), struct.unpack_from("<I", header, at + 4)[0]  # type: ignore[index]
            if chunk == b"data":
                if not self._bytes_per_s:
                    self.bad = "WAV stream without a fmt chunk before its data"
                self._declared = 0 if size in UNKNOWN_SIZES else size
                self.data_bytes = len(header) - at - 8  # type: ignore[arg-type]
                self._header = None
                return
            if chunk == b"fmt ":
                if at + 24 > len(header):  # type: ignore[arg-type]
                    return
                channels, rate = struct.unpack_from("<HI", header, at + 10)  # type: ignore[arg-type]
                bits = struct.unpack_from("<H", header, at + 22)[0]  # type: ignore[arg-type]
                self._bytes_per_s = channels * rate * (bits // 8)
            at += 8 + size + size % 2
        if len(header) > MAX_WAV_HEADER_BYTES:  # type: ignore[arg-type]
            self.bad = f"WAV stream without a data chunk in its first {MAX_WAV_HEADER_BYTES} bytes"
            self._header = None

    def seconds(self) -> float:
        """The audio's seconds so far (0.0 for a format whose seconds are not counted)."""
        data = min(self.data_bytes, self._declared) if self._declared else self.data_bytes
        return data / self._bytes_per_s if self._bytes_per_s else 0.0

    def short(self) -> bool:
        """A WAV that declared more data than came."""
        return bool(self._declared) and self.data_bytes < self._declared

    def close(self, record: RequestRecord) -> None:
        """The audio is over: its bytes and seconds onto `record`, or `record` failed when it is not what was asked
        (a bad or unfinished WAV)."""
        record.output_bytes = self.total_bytes
        if self.bad or self._header is not None:
            record.fail(ErrorKind.BAD_STREAM, self.bad or "WAV stream ended inside its header")
        elif self.short():
            record.fail(ErrorKind.INCOMPLETE, f"WAV stream ended after {self.data_bytes} of its {self._declared} bytes")
        else:
            record.output_s = self.seconds()


def apply_event(record: RequestRecord, data: bytes, t: float, audio: AudioCount) -> bool:
    """Apply one speech SSE event's data that arrived at `t` (perf_counter s) to `record`, its audio counted in
    `audio`; True when the stream is over for the client (`speech.audio.done`, a failure). Never raises."""
    event = decode_object(record, data)
    return True if event is None else guarded(lambda r, e, at: _apply(r, e, at, audio), record, event, t)


def _apply(record: RequestRecord, event: dict, t: float, audio: AudioCount) -> bool:
    """`apply_event` on the decoded event; raises on fields of unexpected types."""
    kind = event.get("type")
    if kind == DELTA:
        piece = event["audio"]
        if type(piece) is not str:
            record.fail(ErrorKind.BAD_STREAM, f"{DELTA} event without audio: {error_text(event)}")
            return True
        if piece:
            apply_token(record, t)
            audio.add_base64(piece)
        return False
    if kind == DONE:
        usage = event.get("usage") or {}
        output_tokens, input_tokens = usage.get("output_tokens"), usage.get("input_tokens")
        if type(output_tokens) is int:
            record.usage_completion_tokens = output_tokens
        if type(input_tokens) is int:
            record.prompt_tokens = input_tokens
        audio.close(record)
        record.finish_reason = "stop"
        record.saw_done = True
        return True
    if kind == "error" or event.get("error"):
        record.fail(ErrorKind.STREAM_ERROR, f"error in stream: {error_text(event.get('error') or event)}")
        return True
    return False


def _request(body: bytes) -> dict[str, Any]:
    """The request's JSON fields (empty when they are not an object)."""
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return fields if isinstance(fields, dict) else {}


class SpeechStream:
    """One speech response applied to its record as its pieces arrive (the `Framing` reader): SSE events (`apply`,
    the API's `apply_event`) or the audio's own bytes, as the request's `stream_format` asked; its audio counted in
    its `response_format` (`AudioCount`). `keep` is not used (the audio has no text)."""

    __slots__ = ("_apply", "_audio", "_events", "_record")

    def __init__(
        self, record: RequestRecord, apply: Any, keep: Any = None, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    ) -> None:
        fields = _request(record.spec.body)
        self._record = record
        self._apply = apply
        self._audio = AudioCount(fields.get("response_format", "mp3"))
        sse = fields.get("stream_format") == "sse"
        self._events = EventStream(record, self._event, None, max_event_bytes) if sse else None

    def _event(self, record: RequestRecord, data: bytes, t: float, chunks: Any) -> bool:
        return self._apply(record, data, t, self._audio)  # type: ignore[no-any-return]

    def feed(self, data: bytes | bytearray, t: float) -> bool:
        """Apply the events completed by `data` (arrived at `t`), or count `data` as audio; True once the stream is
        over for the client."""
        if self._events is not None:
            return self._events.feed(data, t)
        if data:
            apply_token(self._record, t)
            self._audio.add(data)
        return False

    def flush(self, t: float) -> None:
        """The body ended at `t`: a last event without its blank line (SSE), or the audio's end."""
        if self._events is not None:
            self._events.flush(t)
            return
        record = self._record
        if record.ok:
            self._audio.close(record)
            record.finish_reason = "stop"
            record.saw_done = True


SPEECH = Framing("speech", "", SpeechStream)
"""A speech response: SSE, or the audio's own bytes (any content type: audio/pcm, audio/wav, audio/mpeg, ...)."""


def shape(body: dict[str, Any]) -> None:
    """A built-in user's request: its prompt text(s) as `input`, voice `VOICE`, pcm streamed as the audio's bytes (a
    scenario's call sends its own fields)."""
    body["input"] = " ".join(body.pop("texts"))
    body["voice"] = VOICE
    body["response_format"] = "pcm"


API = Api(
    "speech", "text to speech", openai_paths("/v1/audio/speech", azure="audio/speech", databricks=False), shape,
    max_tokens_field="", forces_length=False, parser=apply_event, framing=SPEECH, counting=AUDIO,
    mount="audio.speech.create", user="SpeechUser",
)  # fmt: skip
