"""Text to speech (`POST /v1/audio/speech`, OpenAI's): its request and its synthetic audio, streamed as the audio's own
bytes or as SSE events.

The request (JSON): a non-empty `input` (at most `MAX_INPUT_CHARS` characters; its words are the prompt tokens),
`voice` (a name, or `{"id": ...}`), `response_format` — `pcm` (24 kHz, 16-bit, mono: OpenAI's) or `wav` (the same
samples after a 44-byte header that holds their size); OpenAI's default, `mp3`, and `opus`, `aac`, `flac` are HTTP
400: the simulator encodes none of them —, `speed` (0.25-4.0, default 1), `stream_format` (`audio`, the default, or
`sse`), `instructions`.

The audio is the input read at `WORDS_PER_S` words a second over `speed` (at least one word): silence, its samples
zero. It is generated `CHUNK_S` seconds at a time, each chunk one "token" at the server's timing (TTFT, then one ITL
apart). `stream_format: audio`: the body is the audio's bytes, one HTTP chunk per audio chunk (Content-Type
`audio/pcm` or `audio/wav`; a wav's header goes with the first); `sse`: one `speech.audio.delta` event per chunk
(`audio`: its bytes base64, a wav's header in the first), then `speech.audio.done` with `usage` (`input_tokens` the
input's words, `output_tokens` the chunks, `total_tokens`), as the openai SDK's `SpeechAudioDeltaEvent` /
`SpeechAudioDoneEvent`. The trace's `token_times` are the chunks' write times; its `answer` is
`{"kind": "speech", "audio_s", "format", "audio_bytes"}`: the seconds and bytes of audio the response carries in full.
A mid-stream `stream_error` is an `error` event in SSE; in the audio's bytes, which have no room for one, it is a cut.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass
from typing import Any

import orjson

from llm_locust.sim.apis.wire import Api, CompletionSpec, bad_request

SAMPLE_RATE = 24_000
"""The audio's samples per second (16-bit, mono): OpenAI's pcm."""
SAMPLE_BYTES = 2
WORDS_PER_S = 2.5
"""How fast the input is read at speed 1: 150 words a minute."""
CHUNK_S = 0.1
"""The audio of one output token (one HTTP chunk, one SSE event): 0.1 s, 4800 bytes of pcm."""
CHUNK_SAMPLES = round(CHUNK_S * SAMPLE_RATE)
MAX_INPUT_CHARS = 4096
FORMATS = {"pcm": "audio/pcm", "wav": "audio/wav"}
"""The formats the simulator writes, and their Content-Type."""
WAV_HEADER_BYTES = 44


def wav_header(samples: int) -> bytes:
    """The 44-byte header of a 16-bit mono `SAMPLE_RATE` WAV file of `samples` samples."""
    data = samples * SAMPLE_BYTES
    return b"RIFF" + struct.pack("<I", 36 + data) + b"WAVE" + b"fmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, SAMPLE_RATE, SAMPLE_RATE * SAMPLE_BYTES, SAMPLE_BYTES, 8 * SAMPLE_BYTES
    ) + b"data" + struct.pack("<I", data)  # fmt: skip


class SpokenAudio:
    """The audio a response carries (`wire.Scripted`, `kind` None: no answer the simulator's metrics count by kind;
    no text pieces: its tokens are audio chunks), for the trace."""

    __slots__ = ("response_format", "samples")

    kind = None
    pieces: tuple[str, ...] = ()

    def __init__(self, samples: int, response_format: str) -> None:
        self.samples = samples
        self.response_format = response_format

    def settle(self, batch: int) -> None:
        """Nothing to decide: the audio is known from the request."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form served by /sim/trace: the audio's seconds, its format and its bytes (a wav's header
        included)."""
        header = WAV_HEADER_BYTES if self.response_format == "wav" else 0
        return {"kind": "speech", "audio_s": self.samples / SAMPLE_RATE, "format": self.response_format,
                "audio_bytes": header + self.samples * SAMPLE_BYTES}  # fmt: skip


@dataclass(frozen=True, slots=True)
class SpeechSpec(CompletionSpec):
    """A speech request's spec: its audio's samples and format, streamed as SSE events or as its bytes."""

    samples: int = 0
    response_format: str = "pcm"
    sse: bool = False


def parse(data: dict[str, Any], natural_tokens: int) -> CompletionSpec:
    """The spec of a speech request `data` (ApiError if it is unacceptable); `natural_tokens` is not used: the audio is
    as long as its input read aloud."""
    text = data.get("input")
    if not isinstance(text, str) or not text.strip():
        raise bad_request("'input' must be a non-empty string")
    if len(text) > MAX_INPUT_CHARS:
        raise bad_request(f"'input' must be at most {MAX_INPUT_CHARS} characters, got {len(text)}")
    voice = data.get("voice")
    if not (isinstance(voice, str) and voice) and not (isinstance(voice, dict) and isinstance(voice.get("id"), str)):
        raise bad_request("'voice' must be a voice's name or {\"id\": ...}")
    response_format = data.get("response_format", "mp3")
    if response_format not in FORMATS:
        raise bad_request(f"response_format {response_format!r} is not one the simulator writes: {', '.join(FORMATS)}")
    speed = data.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0.25 <= speed <= 4.0:
        raise bad_request(f"'speed' must be a number from 0.25 to 4.0, got {speed!r}")
    stream_format = data.get("stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        raise bad_request(f"'stream_format' must be audio or sse, got {stream_format!r}")
    words = len(text.split())
    samples = round(max(words, 1) / WORDS_PER_S / speed * SAMPLE_RATE)
    return SpeechSpec(
        stream=True, include_usage=True, prompt_tokens=max(words, 1), output_tokens=math.ceil(samples / CHUNK_SAMPLES),
        finish_reason="stop", answer=SpokenAudio(samples, response_format), samples=samples,
        response_format=response_format, sse=stream_format == "sse",
    )  # fmt: skip


def content_type(spec: CompletionSpec) -> str:
    """A speech stream's Content-Type: SSE, or its audio format's."""
    speech: SpeechSpec = spec  # type: ignore[assignment]  # `parse` made it
    return "text/event-stream" if speech.sse else FORMATS[speech.response_format]


class SpeechEncoder:
    """The chunks of one speech response: the audio's bytes, or SSE events carrying them (the module docstring)."""

    __slots__ = ("spec",)

    def __init__(self, spec: CompletionSpec, response_id: str, created_s: int, model: str, offset: int) -> None:
        self.spec: SpeechSpec = spec  # type: ignore[assignment]  # `parse` made it

    def _audio(self, start: int, stop: int) -> bytes:
        """The audio of chunks `start` .. `stop - 1` (silence; a wav's header before the first)."""
        spec = self.spec
        samples = min(stop * CHUNK_SAMPLES, spec.samples) - start * CHUNK_SAMPLES
        header = wav_header(spec.samples) if start == 0 and spec.response_format == "wav" else b""
        return header + bytes(SAMPLE_BYTES * samples)

    def _piece(self, audio: bytes) -> bytes:
        """`audio` as the stream carries it: itself, or a `speech.audio.delta` event."""
        if not self.spec.sse:
            return audio
        return b'data: {"type":"speech.audio.delta","audio":"%b"}\n\n' % base64.b64encode(audio)

    def start_events(self) -> bytes:
        """Nothing before the first chunk."""
        return b""

    def token_event(self, index: int) -> tuple[bytes, bytes]:
        """Chunk `index` as (empty prefix, its piece)."""
        return b"", self._piece(self._audio(index, index + 1))

    def tokens_event(self, start: int, stop: int) -> bytes:
        """Chunks `start` .. `stop - 1` in one piece (`--tokens-per-chunk`)."""
        return self._piece(self._audio(start, stop))

    def text_event(self, text: str) -> bytes:
        """`text`'s bytes as a piece of audio (the huge-chunk fault's)."""
        return self._piece(text.encode())

    def end_events(self) -> list[bytes]:
        """SSE: the `speech.audio.done` event with the usage; the audio's bytes: nothing."""
        if not self.spec.sse:
            return []
        spec = self.spec
        usage = {"input_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens,
                 "total_tokens": spec.prompt_tokens + spec.output_tokens}  # fmt: skip
        return [b"data: " + orjson.dumps({"type": "speech.audio.done", "usage": usage}) + b"\n\n"]

    def error_event(self, message: str) -> bytes:
        """SSE: an `error` event; the audio's bytes: nothing (the stream is cut)."""
        if not self.spec.sse:
            return b""
        error = {"message": message, "type": "server_error", "code": "server_error"}
        return b"data: " + orjson.dumps({"type": "error", "error": error}) + b"\n\n"

    def body(self) -> bytes:
        """The whole audio (a speech response is always streamed: `parse` says so)."""
        return self._audio(0, self.spec.output_tokens)


API = Api(
    name="speech",
    paths=("/v1/audio/speech",),
    id_prefix="speech",
    parse=parse,
    encoder=SpeechEncoder,
    content_type="",  # no one content type (the client's framing takes any): each stream's, `stream_content_type`
    stream_content_type=content_type,
    request_id_header="x-request-id",  # neither the audio nor its events carry an id, as OpenAI's do not
)
